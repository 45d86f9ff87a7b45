"""## What it does
Checks for `next(iter(loader))` inside a training loop: a fresh iterator over a DataLoader (or
dataset) is created on every step to take one batch from it.

## Why is this bad?
Every `iter(loader)` starts a new epoch of the loader: its worker processes are started again
(seconds per step with `num_workers > 0`) and, without shuffling, it yields the same first batch
every time, so the model trains on one batch over and over. With shuffling it silently samples
with replacement and ignores epoch boundaries. Taking one batch outside the loop (to get shapes
or a fixed visualisation batch), under a condition, or in an `except StopIteration` handler is
not flagged.

## Fix
Create the iterator once and advance it: `it = iter(loader)` before the loop, `batch = next(it)`
inside (re-creating it on `StopIteration`), or iterate `for batch in loader:`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Kind
from loopcheck.model.syntax import positional, source
from loopcheck.model.training import is_data_iterable
from loopcheck.rules._base import Rule, Violation


class DataloaderIterRecreated(Rule):
    code = "LC604"
    message = "next(iter(loader)) inside the training loop restarts the loader on every step"
    requires_all = ("iter(",)  # `next(iter(` or `iter(...).next()`, inside a training loop (the default `requires`)

    VALID = [
        """
train_iter = iter(train_loader)
for step in range(max_steps):
    try:
        x, y = next(train_iter)
    except StopIteration:
        train_iter = iter(train_loader)
        x, y = next(train_iter)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
sample_x, _ = next(iter(val_loader))
device = next(iter(model.parameters())).device
for x, y in train_loader:
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
def test_sync_with_repeated_batch(ddp_model, dataloader):
    for _ in range(3):
        x, y = next(iter(dataloader))
        with ddp_model.no_sync():
            ddp_model(x).sum().backward()
""",
    ]
    INVALID = [
        """
for step in range(max_steps):
    x, y = next(iter(train_loader))  # LC604
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.loop.function is not None and training.loop.function.name.value.startswith("test"):
                continue  # a test re-reads a fixed first batch on purpose
            for restart in training.loop.events(Kind.LOADER_RESTART):
                if not is_data_iterable(_iterated(restart.node)):
                    continue  # `next(iter(model.parameters()))` and the like take no data
                if any(c.test is None for c in restart.conds) or not training.reader.guard(restart.conds, restart.order).always:
                    continue  # once per epoch, in an except handler, or every N steps
                if restart.receiver in training.loop.assigned_names():
                    continue  # the loader itself is rebuilt in the loop: its first pass, not a restart
                yield self.at(restart, f"`{source(restart.node)}` creates a new iterator over `{restart.receiver}` "
                                       "on every step: the loader starts over each time (its worker processes "
                                       "too, and its sampler: a shuffling loader draws from a new permutation, "
                                       "one without shuffling yields the same first batch every step)")


def _iterated(call: cst.CSTNode) -> cst.BaseExpression | None:
    """``loader`` in ``next(iter(loader))`` or ``iter(loader).next()``."""
    if not isinstance(call, cst.Call):
        return None
    if isinstance(call.func, cst.Attribute):
        inner: cst.BaseExpression | None = call.func.value
    else:
        inner = positional(call)[0] if positional(call) else None
    args = positional(inner) if isinstance(inner, cst.Call) else []
    return args[0] if args else None
