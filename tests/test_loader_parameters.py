"""`next(iter(loader))` where `loader` is a parameter of the function that runs the training loop
(`def train(model, train_loader, steps)`): what the file's calls pass for it decides, and where no
call is visible the parameter's own name does, as for a name the file binds nowhere."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

TRAIN = """
    import torch
    from torch.utils.data import DataLoader


    def batches(loader):
        while True:
            yield from loader


    def train(model, train_loader, optimizer, steps):
        for step in range(steps):
            x, y = next(iter(train_loader))
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    CALLS
"""


def _codes(calls: str) -> list[str]:
    source = textwrap.dedent(TRAIN).replace("CALLS", calls)
    return [f.code for f in check_text(source, "train.py", resolve(select=["LC604"]))]


@pytest.mark.parametrize("calls", [
    "",  # called from another module: the parameter's name says it is a loader
    "loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4)\ntrain(model, loader, optimizer, 1000)",
    "dl = DataLoader(dataset)\ntrain(model, dl, optimizer, 10)\ntrain(model, dl, optimizer, 20)",
])
def test_a_loader_parameter_restarted_on_every_step_is_flagged(calls: str) -> None:
    assert _codes(calls) == ["LC604"]


@pytest.mark.parametrize("calls", [
    "train(model, batches(loader), optimizer, 1000)",  # a generator: iter() of it is itself
    "it = iter(loader)\ntrain(model, it, optimizer, 1000)",  # an iterator, advanced
    "train(model, loader_a, optimizer, 10)\ntrain(model, batches(loader_b), optimizer, 10)",  # not the same
    # shuffling, no workers: a random batch per step, nothing restarted
    "loader = DataLoader(dataset, batch_size=32, shuffle=True)\ntrain(model, loader, optimizer, 1000)",
])
def test_a_parameter_the_callers_fill_with_an_iterator_is_not(calls: str) -> None:
    assert _codes(calls) == []
