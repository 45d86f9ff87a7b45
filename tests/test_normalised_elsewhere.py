"""Accumulation whose normalisation or guarantee sits somewhere other than the usual place: the
learning rate divided by N (Darknet's subdivision), the loss divided before a GradScaler scales it in
an assignment, the batch count asserted a multiple of N in a nested epoch function. Each shape that
must stay quiet has a twin, the same code without the normalisation, that must still be flagged."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_DARKNET = """
import torch

def main(cfg, model, dataiterator):
    batch_size = cfg["BATCHSIZE"]
    subdivision = cfg["SUBDIVISION"]
    base_lr = LR_VALUE
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9)
    for iter_i in range(cfg["MAXITER"]):
        optimizer.zero_grad()
        for inner_iter_i in range(subdivision):
            imgs, targets = next(dataiterator)
            loss = model(imgs, targets)
            loss.backward()
        optimizer.step()
"""


def _codes(source: str, codes: str) -> list[tuple[int, str]]:
    found = check_text(textwrap.dedent(source), "train.py", resolve(select=codes.split(",")))
    return sorted((f.line, f.code) for f in found)


@pytest.mark.parametrize(("lr", "flagged"), [
    ('cfg["LR"] / batch_size / subdivision', []),  # the step is lr / N times the window's sum
    ('cfg["LR"] / (batch_size * subdivision)', []),
    ('cfg["LR"] / batch_size', [(14, "LC102")]),  # N nowhere: the window's sum, N times too large
    ('cfg["LR"]', [(14, "LC102")]),
])
def test_lr_divided_by_the_accumulation_count_normalises_the_step(lr: str, flagged: list[tuple[int, str]]) -> None:
    assert _codes(_DARKNET.replace("LR_VALUE", lr), "LC102") == flagged


@pytest.mark.parametrize(("lr", "flagged"), [
    ("args.base_lr * args.batch_size * subdivision / 256", []),  # N by its own name
    ("args.base_lr * args.batch_size / 256", [(6, "LC304")]),
])
def test_lr_scaled_by_the_accumulation_count_under_its_own_name(lr: str, flagged: list[tuple[int, str]]) -> None:
    source = f"""
    import torch

    def main(args, model, loader, subdivision):
        for epoch in range(args.epochs):
            lr = {lr}
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            for i, (x, y) in enumerate(loader):
                loss = model(x, y) / subdivision
                loss.backward()
                if (i + 1) % subdivision == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert _codes(source, "LC304") == flagged


_TABPFN = """
import torch

def train(model, dl, criterion, epochs, k, scaler=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_epoch():
        ASSERT
        for batch, (data, targets) in enumerate(dl):
            loss = criterion(model(data), targets)
            DIVIDE
            if scaler: loss = scaler.scale(loss)
            loss.backward()
            if batch % k == k - 1:
                optimizer.step()
                optimizer.zero_grad()

    for epoch in range(epochs):
        train_epoch()
"""


@pytest.mark.parametrize(("divide", "flagged"), [
    ("loss = loss / k", []),  # the scaler's factor is undone before the step
    ("pass", [(13, "LC102")]),  # a raw loss, scaled or not
])
def test_loss_divided_before_the_scaler_scales_it(divide: str, flagged: list[tuple[int, str]]) -> None:
    source = _TABPFN.replace("ASSERT", "assert len(dl) % k == 0").replace("DIVIDE", divide)
    assert _codes(source, "LC102") == flagged


@pytest.mark.parametrize(("check", "flagged"), [
    ("assert len(dl) % k == 0", []),  # every window of an epoch is whole
    ("pass", [(14, "LC105")]),
])
def test_batch_count_asserted_in_the_nested_epoch_function(check: str, flagged: list[tuple[int, str]]) -> None:
    source = _TABPFN.replace("ASSERT", check).replace("DIVIDE", "loss = loss / k")
    assert _codes(source, "LC105") == flagged


@pytest.mark.parametrize(("lr", "flagged"), [
    ('cfg["LR"] / batch_size', []),  # a summed loss normalised through the LR: DDP averages the ranks' sums
    ('cfg["LR"] / (256 / batch_size)', [(7, "LC304")]),  # the batch in the numerator after all
    ('cfg["LR"] * batch_size / 256', [(7, "LC304")]),  # the linear rule on the per-process batch
])
def test_lr_divided_by_the_batch_size_is_no_scaling_rule(lr: str, flagged: list[tuple[int, str]]) -> None:
    source = f"""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def main(cfg, model, loader):
        batch_size = cfg["BATCHSIZE"]
        base_lr = {lr}
        model = DDP(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=base_lr)
        for x, y in loader:
            optimizer.zero_grad()
            model(x, y).backward()
            optimizer.step()
    """
    assert _codes(source, "LC304") == flagged
