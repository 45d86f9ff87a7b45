"""## What it does
Opt-in, with a reference declared in `[tool.loopcheck.lr-scaling]`: checks that a learning rate
the file pins down (a literal, a single assignment or an argparse default) that is
`warmup-threshold` times (default 8x) the reference learning rate or more is not applied from
the first step: the file must have some warmup (a `*_with_warmup` schedule, `LinearLR`,
`OneCycleLR`, `SequentialLR`, or any name mentioning warmup).

## Why is this bad?
Large learning rates from linear scaling are only stable after a warmup: the first updates,
taken while the weights and the optimizer's moment estimates are still far from settled, blow
up the loss or kill units (Goyal et al., "Accurate, Large Minibatch SGD").

## Fix
Ramp the learning rate up over the first steps, e.g. `LinearLR(optimizer, start_factor=0.01,
total_iters=warmup_steps)` chained with the main schedule by `SequentialLR`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.config import LrScaling, Options
from loopcheck.model import FileModel
from loopcheck.model.values import optimizer_lrs
from loopcheck.rules._base import Rule, Violation

_WARMUP_MARKERS = ("warmup", "warm_up", "LinearLR", "OneCycleLR", "SequentialLR")


class WarmupMissing(Rule):
    code = "LC305"
    message = "a learning rate scaled far above the reference is applied from the first step, without warmup"

    # Without [tool.loopcheck.lr-scaling] there is no reference and the rule is silent.
    EXAMPLE_OPTIONS = Options(lr_scaling=LrScaling(reference_batch_size=256, reference_lr=0.1))
    VALID = [
        """
optimizer = torch.optim.SGD(model.parameters(), lr=3.2, momentum=0.9)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=5 * len(loader))
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    warmup.step()
""",
    ]
    INVALID = [
        """
optimizer = torch.optim.SGD(model.parameters(), lr=3.2, momentum=0.9)  # LC305
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        reference = model.options.lr_scaling
        if reference is None or not model.training_loops:
            return
        if any(marker in model.source for marker in _WARMUP_MARKERS):
            return
        for node, lr in optimizer_lrs(model.index):
            if lr >= reference.warmup_threshold * reference.reference_lr:
                yield Violation(node, node, f"the learning rate {lr:g} is {lr / reference.reference_lr:.0f}x the "
                                            f"reference {reference.reference_lr:g} and starts without warmup")
