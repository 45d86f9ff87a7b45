"""Two ways a loop only seems to close its last window (SIIM-RSNA Covid 2021's exp714): a debugging
run's early exit at the loop top (``if debug: if step_train == 2: break``) ends no real pass early,
and a last-batch clause ``step_train == len(train_dataloader)`` on the 0-based ``enumerate`` index is
never true. The partial window is carried all the same (LC105)."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import torch


def train(model, optimizer, loader, epochs, accum, debug):
    for epoch in range(epochs):
        for step_train, (x, y) in enumerate(loader):
            {exit}
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum
            loss.backward()
            if (step_train + 1) % accum == 0{flush}:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize(("exit", "flush", "found"), [
    ("if debug:\n                if step_train == 2:\n                    break", "", 1),
    ("pass", " or step_train == len(loader)", 1),
    ("if debug:\n                if step_train == 2:\n                    break", " or step_train == len(loader)", 1),
    # a real last-batch clause, and a real cap on the pass
    ("pass", " or step_train + 1 == len(loader)", 0),
    ("pass", " or step_train == len(loader) - 1", 0),
    ("if step_train >= 100:\n                break", "", 0),
])
def test_a_window_that_only_seems_closed(exit: str, flush: str, found: int) -> None:
    source = textwrap.dedent(LOOP.format(exit=exit, flush=flush))
    assert len([f for f in check_text(source, "train.py", resolve()) if f.code == "LC105"]) == found
