"""## What it does
Checks for gradients cleared after `backward()` and before the `optimizer.step()` that should
use them.

## Why is this bad?
The step then sees zero (or `None`) gradients: the optimizer does nothing, or only applies
weight decay and momentum. The loss curve stays flat and nothing errors.

## Fix
Zero the gradients before `backward()` or after `optimizer.step()`, never between them.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import Event, FileModel, Framework, Kind, Style
from loopcheck.model.guards import exclusive
from loopcheck.rules._base import Rule, Violation


class ZeroGradBeforeStep(Rule):
    code = "LC104"
    message = "gradients are cleared after backward and before the step that should use them"

    VALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
        """
for x, y in loader:
    netD.zero_grad()
    errD = criterion(netD(x), real)
    errD.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = criterion(netD(netG(z)), real)
    errG.backward()
    optimizerG.step()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # LC104
    optimizer.step()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        model.zero_grad()  # LC104
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.NO_STEP):
                continue
            optimizers = {s.optimizer for s in training.steps}
            last_backward = max(b.order for b in training.loop.events(Kind.BACKWARD, deep=True))
            for step in training.steps:
                if step.closure or step.framework is not Framework.TORCH:
                    continue
                for zero in training.step_loop.events(Kind.ZERO_GRAD):
                    if _between(zero, last_backward, step, optimizers):
                        yield self.at(zero, f"`{zero.receiver}.zero_grad()` clears the gradients after backward and "
                                            f"before `{step.receiver}` steps: the step uses no gradients")


def _between(zero: Event, last_backward: int, step: Event, optimizers: set[str | None]) -> bool:
    if not last_backward < zero.order < step.order or exclusive(zero.conds, step.conds):
        return False
    # the zeroing must run whenever the step runs: same branch or unconditional around it
    if zero.conds != step.conds[: len(zero.conds)]:
        return False
    if zero.target == "optimizer":
        return zero.receiver == step.optimizer
    return len(optimizers) == 1
