"""LC103 where the only zeroing sits under `if scheduler:` (tez's `train_one_step`): run on the CPU
without a scheduler, each step sees the sum of every gradient since the start."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_FIT = """
import torch


def fit(model, loader, optimizer, scheduler=None):
    seen = []
    for x in loader:
        model(x).sum().backward()
        seen.append(model.weight.grad.clone())
        optimizer.step()
{tail}
    return seen
"""

_NESTED = """\
        if scheduler:
            scheduler.step()
            optimizer.zero_grad()"""
_AFTER = """\
        if scheduler:
            scheduler.step()
        optimizer.zero_grad()"""


@pytest.mark.parametrize(("tail", "reported", "summed"), [(_NESTED, True, True), (_AFTER, False, False)])
def test_a_zeroing_only_when_a_scheduler_is_set(tail: str, reported: bool, summed: bool) -> None:
    torch = pytest.importorskip("torch")
    source = textwrap.dedent(_FIT).replace("{tail}", tail)
    assert bool([f for f in check_text(source, "train.py", resolve()) if f.code == "LC103"]) == reported
    namespace: dict = {}
    exec(compile(source, "train.py", "exec"), namespace)
    model = torch.nn.Linear(2, 1, bias=False)
    seen = namespace["fit"](model, [torch.ones(1, 2)] * 3, torch.optim.SGD(model.parameters(), lr=0.0))
    assert torch.equal(seen[2], 3 * seen[0]) == summed  # the third step sees three batches' gradients
