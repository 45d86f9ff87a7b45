"""## What it does
Checks for an optimizer stepped twice on the same gradients in one iteration, e.g.
`scaler.step(optimizer)` followed by a leftover `optimizer.step()`.

## Why is this bad?
The second step applies the same gradients again: for SGD a doubled learning rate, for Adam a
second moment update from stale gradients, and under AMP an update that bypasses the scaler's
inf/NaN check.

## Fix
Keep exactly one step per optimizer per iteration.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import FileModel, Framework, Kind, Style
from loopcheck.rules._base import Rule, Violation


class DoubleStep(Rule):
    code = "LC109"
    message = "the optimizer steps twice on the same gradients in one iteration"

    VALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
        """
for x, y in loader:
    for closure in closures:
        optimizer.step(closure)
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.step()  # LC109
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.NO_STEP):
                continue
            steps = [s for s in training.steps if not s.closure and s.framework is not Framework.ENGINE]
            backwards = training.step_loop.events(Kind.BACKWARD, deep=True)
            for first, second in zip(steps, steps[1:]):
                if first.optimizer != second.optimizer or first.conds != second.conds:
                    continue
                if any(first.order < b.order < second.order for b in backwards):
                    continue
                yield self.at(second, f"`{second.optimizer}` already stepped earlier in this iteration with no "
                                      "backward since: the same gradients are applied twice")
