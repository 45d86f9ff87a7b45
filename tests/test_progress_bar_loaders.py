"""A loader a ``with`` statement wraps in a progress bar (``with tqdm(train_dl, leave=True) as pbar:``,
then ``for idx, batch in enumerate(pbar):``, RSNA 2024's training scripts) is the loop's loader: its
last, partial window is read as any loader's (LC105)."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import torch
from tqdm import tqdm


def train(model, optimizer, train_dl, epochs, accum):
    for epoch in range(epochs):
        with {bar} as pbar:
            optimizer.zero_grad()
            for idx, (x, y) in enumerate(pbar):
                loss = torch.nn.functional.cross_entropy(model(x), y) / accum
                loss.backward()
                if (idx + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
"""


@pytest.mark.parametrize(("bar", "found"), [
    ("tqdm(train_dl, leave=True)", 1),
    ("tqdm(total=100)", 0),  # a bar over nothing: `pbar` is no loader
])
def test_a_loader_a_with_statement_wraps_in_a_progress_bar(bar: str, found: int) -> None:
    source = textwrap.dedent(LOOP.format(bar=bar))
    assert len([f for f in check_text(source, "train.py", resolve()) if f.code == "LC105"]) == found
