"""## What it does
Checks for an LR scheduler stepped before the optimizer in an iteration, in the batch loop or at
the start of the epoch loop.

## Why is this bad?
Since PyTorch 1.1 `scheduler.step()` must follow `optimizer.step()`. Stepping it first skips the
first value of the schedule (the initial learning rate is never used, a warmup starts one step
late, a step decay comes one epoch early). PyTorch warns once, which is easy to miss in logs.

## Fix
Call `scheduler.step()` after `optimizer.step()`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_after, own_line
from loopcheck.model import Event, FileModel, Framework, Kind, Style
from loopcheck.model.guards import GuardReader, exclusive
from loopcheck.rules._base import Rule, Violation


class SchedulerBeforeOptimizer(Rule):
    code = "LC302"
    message = "the LR scheduler steps before the optimizer"
    fixable = True

    VALID = [
        """
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
""",
        """
for epoch in range(epochs):
    lr_scheduler.step(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    scheduler.step()  # LC302
    optimizer.step()
""",
        """
for epoch in range(epochs):
    scheduler.step()  # LC302
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            steps = [s for s in training.steps if s.framework in (Framework.TORCH, Framework.LOSS_SCALER)]
            if training.style in (Style.FRAMEWORK, Style.NO_STEP) or not steps:
                continue
            first = min(steps, key=lambda s: s.order)
            loop = training.step_loop
            for scheduler in loop.events(Kind.SCHEDULER_STEP):
                if scheduler.has_args or scheduler.order > first.order or exclusive(scheduler.conds, first.conds):
                    continue
                if scheduler.conds != first.conds[: len(scheduler.conds)]:
                    continue
                yield self._report(model, scheduler, first.stmt)
            outer = loop.parent
            if outer is None or not outer.is_loop:
                continue
            reader = GuardReader(outer, model.index.int_inits)
            for scheduler in outer.events(Kind.SCHEDULER_STEP):
                if not scheduler.has_args and scheduler.order < loop.order and reader.guard(
                        scheduler.conds, scheduler.order).always:
                    yield self._report(model, scheduler, loop.node)

    def _report(self, model: FileModel, scheduler: Event, after: cst.CSTNode) -> Violation:
        """``after``: the statement the scheduler step belongs behind (the step, or the batch loop)."""
        movable = own_line(scheduler) and model.owner(scheduler.stmt) is model.owner(after) is not None
        fix = move_after(scheduler.stmt, after, "move the scheduler step after the optimizer step") \
            if movable else None  # type: ignore[arg-type]
        return self.at(scheduler, f"`{scheduler.receiver}.step()` runs before `optimizer.step()`: the first "
                                  "value of the schedule is skipped", fix)
