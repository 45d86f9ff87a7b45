"""A test of the accumulation count beside the step's `% N` test (`if N == 1 and i == 0: zero_grad()`)
is a run setting that can go either way: the loop is read with N > 1 too, not only as the one side
that has the zeroing (which would read the step as every batch). And a loop that back-propagates
only on the step's micro-batch has no partial window to carry: LC113, not LC105."""
from __future__ import annotations

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
def train(model, optimizer, loader, accum):
    for i, (x, y) in enumerate(loader):
        {zeroing}
        loss = model(x, y) / accum
        {backward_every}
        if (i + 1) % accum == 0 or i + 1 == len(loader):
            {backward_in_step}
            optimizer.step()
            optimizer.zero_grad()
"""


def codes(zeroing: str, every: bool) -> list[str]:
    source = LOOP.format(zeroing=zeroing, backward_every="loss.backward()" if every else "pass",
                         backward_in_step="pass" if every else "loss.backward()")
    return sorted(f.code for f in check_text(source, "train.py", resolve(select=["LC1"])))


@pytest.mark.parametrize("zeroing", [
    "if accum == 1 and i == 0: optimizer.zero_grad()",
    "if accum == 1: optimizer.zero_grad()",
    "if accum <= 1 and i == 0: optimizer.zero_grad()",
    "pass",
])
def test_backward_only_in_the_step_branch_is_found_whatever_the_count_test(zeroing: str) -> None:
    assert codes(zeroing, every=False) == ["LC113"]


@pytest.mark.parametrize("zeroing", [
    "if accum == 1 and i == 0: optimizer.zero_grad()",
    "if accum == 1: optimizer.zero_grad()",
    "pass",
])
def test_backward_on_every_micro_batch_is_clean(zeroing: str) -> None:
    assert codes(zeroing, every=True) == []


def test_no_partial_window_is_carried_where_only_the_step_back_propagates() -> None:
    source = LOOP.format(zeroing="pass", backward_every="pass", backward_in_step="loss.backward()").replace(
        " or i + 1 == len(loader)", "")
    assert sorted(f.code for f in check_text(source, "train.py", resolve(select=["LC1"]))) == ["LC113"]
