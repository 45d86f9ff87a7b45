"""LC402 and EMAs updated where their method calls do not say `update`: by calling the object inside the
epoch function it is handed to, by a Keras-style batch callback, or never meant to be (a smoke test of
the EMA's own broadcast, in a function that trains nothing)."""

from __future__ import annotations

from loopcheck.engine import check_source

_CALLED_IN_THE_EPOCH = """
import torch
from ema import EMA


def train_epoch(model, loader, optimizer, ema, niter):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        niter += 1
        if ema is not None:
            {update}
    return niter


def train(model, loader, epochs=3):
    optimizer = torch.optim.Adam(model.parameters())
    ema = EMA(model, 0.9999)
    niter = 0
    for epoch in range(epochs):
        niter = train_epoch(model, loader, optimizer, ema, niter)
    return ema
"""

_CALLBACK = """
import torch
from utils import EMA


def train(model, loader, epochs=3):
    optimizer = torch.optim.Adam(model.parameters())
    ema = EMA(model, 0.999, n=10)
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            {update}
    return ema
"""

_SMOKE = """
import torch
from training.ema import ModelEMA


def run_ema_broadcast_test(model):
    ema = ModelEMA(model)
    for p in ema.ema.parameters():
        p.data.mul_(1.5)
    {keep}


def run_training(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def _lc402(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC402"])]


def test_an_ema_called_inside_the_epoch_function_it_is_handed_to() -> None:
    # recurrent-transformer: `if ema is not None: ema(model, niter)`, EMA.__call__ averages the weights
    assert _lc402(_CALLED_IN_THE_EPOCH.format(update="ema(model, niter)")) == []
    assert _lc402(_CALLED_IN_THE_EPOCH.format(update="pass")) == ["LC402"]


def test_a_batch_callback_updates_the_ema() -> None:
    # kaggle_jigsaw: `ema.on_batch_end(model)` updates every n batches
    assert _lc402(_CALLBACK.format(update="ema.on_batch_end(model)")) == []
    assert _lc402(_CALLBACK.format(update="ema.on_train_begin(model)")) == ["LC402"]


def test_an_ema_a_function_that_trains_nothing_keeps_to_itself() -> None:
    # LibreYOLO's DDP smoke test builds one to check its broadcast
    assert _lc402(_SMOKE.format(keep="print(next(ema.ema.parameters()))")) == []
    assert _lc402(_SMOKE.format(keep="return ema")) == ["LC402"]
