"""A zeroing once per epoch, outside the batch loop that steps on every batch (htjb's
``optimizer.zero_grad()`` at the top of each epoch, fixed by its author in d0243cf), clears nothing
between the steps of an epoch: each adds up the gradients of the earlier ones (LC103). A zeroing in
the batch loop, an accumulating loop, or a batch loop that stops after its step are read as before."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

EPOCHS = """
import torch


def train(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        {before}
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            {step}
        {after}
"""


@pytest.mark.parametrize(("before", "step", "after", "found"), [
    ("optimizer.zero_grad()", "optimizer.step()", "pass", 1),
    ("pass", "optimizer.step()", "optimizer.zero_grad()", 1),
    # cleared after every step
    ("optimizer.zero_grad()", "optimizer.step(); optimizer.zero_grad()", "pass", 0),
    # the batch loop gathers one step's micro-batches and stops
    ("optimizer.zero_grad()", "optimizer.step(); break", "pass", 0),
    # an accumulation window: the epoch-start zeroing and the step's own
    ("optimizer.zero_grad()", "if (epoch + 1) % 4 == 0:\\n                optimizer.step()\\n"
                              "                optimizer.zero_grad()", "pass", 0),
])
def test_a_zeroing_once_per_epoch_around_a_loop_that_steps_every_batch(before: str, step: str, after: str,
                                                                     found: int) -> None:
    source = textwrap.dedent(EPOCHS.format(before=before, step=step, after=after))
    missing = [f for f in check_text(source, "train.py", resolve()) if f.code == "LC103"]
    assert len(missing) == found
    if found:
        assert "cleared only once per pass of the loop around this one" in missing[0].message
