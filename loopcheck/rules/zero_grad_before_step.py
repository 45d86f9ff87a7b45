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
from loopcheck.model.optimizers import Zeroing
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
        """
for real, _ in loader:
    optimizerD.zero_grad()
    errD = criterion(netD(real), ones) + criterion(netD(netG(noise()).detach()), zeros)
    errD.backward()
    optimizerD.zero_grad()  # LC104
    optimizerD.step()
    optimizerG.zero_grad()
    errG = criterion(netD(netG(noise())), ones)
    errG.backward()
    optimizerG.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.NO_STEP):
                continue
            optimizers = {s.optimizer for s in training.steps}
            zeroing = Zeroing(model, {o for o in optimizers if o})
            # every backward of the step's loop, an inner loop's too (a GAN's second accumulation loop)
            backwards = [b.order for b in training.step_loop.events(Kind.BACKWARD, deep=True)]
            for step in training.steps:
                if step.closure or step.framework is not Framework.TORCH:
                    continue
                feeding = [b for b in backwards if b < step.order]  # the backward this step consumes
                if not feeding:
                    continue
                for zero in training.step_loop.events(Kind.ZERO_GRAD):
                    if _between(zero, max(feeding), step) and _clears(zeroing, zero, step, optimizers):
                        yield self.at(zero, f"`{zero.receiver}.zero_grad()` clears the gradients after backward and "
                                            f"before `{step.receiver}` steps: the step uses no gradients")


def _between(zero: Event, last_backward: int, step: Event) -> bool:
    if not last_backward < zero.order < step.order or exclusive(zero.conds, step.conds):
        return False
    # the zeroing must run whenever the step runs: same branch or unconditional around it
    return zero.conds == step.conds[: len(zero.conds)]


def _clears(zeroing: Zeroing, zero: Event, step: Event, optimizers: set[str | None]) -> bool:
    """Certainly the gradients ``step`` uses: its own optimizer or module, or the loop's only optimizer."""
    clears = zeroing.clears(zero, step.optimizer)
    return clears is True or clears is None and zero.target != "optimizer" and len(optimizers) == 1
