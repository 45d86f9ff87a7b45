"""## What it does
Checks for gradients being zeroed on every micro-batch of a gradient-accumulation loop: by the
optimizer, the model, or `p.grad = None`. A LightningModule under manual optimization that
accumulates by hand (`self.manual_backward(loss)`, `opt.step()` every N batches in
`training_step`) is checked the same way: Lightning leaves its zeroing and stepping as written.
A backward that runs now and then and is cleared in its own branch before any step (a probe's
`probe_loss.backward(); optimizer.zero_grad()`) feeds no window and is left out.

## Why is this bad?
Under accumulation the optimizer steps only every N micro-batches and relies on `backward()`
summing the gradients of the whole window. Zeroing on every micro-batch throws away N-1 of the N
backward passes: each step sees one micro-batch, at N times the compute. Nothing crashes; the
model just trains worse. Inside `accelerator.accumulate()` a prepared optimizer's `zero_grad()`
is gated by Accelerate, but `model.zero_grad()` is not.

## Fix
Move the zeroing into the step branch, after `optimizer.step()` (or guard it with the window
start, `if i % N == 0:`).
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.fixes import move_to_step
from loopcheck.model import Event, FileModel, GuardKind, Kind, Style, TrainingLoop
from loopcheck.model.syntax import source
from loopcheck.rules._base import Rule, Violation


class ZeroGradInAccumulation(Rule):
    code = "LC101"
    message = "gradients are zeroed on every micro-batch, but the optimizer steps only every N micro-batches"
    fixable = True

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    if i % accum_steps == 0:
        optimizer.zero_grad()
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
""",
        """
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()  # LC101
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
""",
        """
while step < max_steps:
    for micro_step in range(grad_accum):
        x, y = get_batch()
        model.zero_grad()  # LC101
        loss = model(x, y) / grad_accum
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    step += 1
""",
        """
for batch in loader:
    with accelerator.accumulate(model):
        model.zero_grad()  # LC101
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
    else:
        optimizer.zero_grad()  # LC101
""",
        """
for i, (x, y) in enumerate(loader):
    for p in model.parameters():
        p.grad = None  # LC101
    loss = criterion(model(x), y) / 8
    loss.backward()
    if (i + 1) % 8 == 0:
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE):
                continue
            backwards = [b for b in training.backwards if not _cancelled(training, b)]
            if not backwards or not all(training.every_iteration(b) for b in backwards):
                continue
            for zero in training.events(Kind.ZERO_GRAD):
                if training.guard(zero).kind not in (GuardKind.ALWAYS, GuardKind.NOT_PERIODIC):
                    continue  # the `else:` of the step condition zeroes every non-boundary micro-batch
                if training.style is Style.ACCELERATE and zero.target == "optimizer":
                    continue  # Accelerate's prepared optimizer skips zero_grad on non-sync steps
                # a method or function of another project module: the message names where it zeroes
                elsewhere = model.project.where(zero.node) if model.project is not None else None
                fix = move_to_step(model, training, zero, "move the zeroing after the optimizer step") \
                    if training.style is not Style.ACCELERATE else None
                through = f" (by `{source(zero.node)}`, {elsewhere})" if elsewhere else ""
                yield self.at(zero, f"`{zero.receiver}` gradients are zeroed{through} on every micro-batch while the "
                                    f"optimizer steps every N micro-batches ({training.style.value}): "
                                    "N-1 of N backward passes are thrown away", fix)


def _cancelled(training: TrainingLoop, backward: Event) -> bool:
    """A backward that runs only now and then and whose gradients a zeroing in its own branch clears
    before any step (a probe's `probe_loss.backward(); optimizer.zero_grad()` to record activation and
    gradient statistics): it feeds no window, so the windows are read from the other backwards."""
    if training.every_iteration(backward):
        return False
    steps = [s.order for s in training.events(Kind.STEP)]
    return any(z.conds == backward.conds and backward.order < z.order and z.target in ("optimizer", "model")
               and not any(backward.order < s < z.order for s in steps) for z in training.events(Kind.ZERO_GRAD))
