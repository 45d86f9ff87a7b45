"""## What it does
Checks for `scaler.unscale_(optimizer)` (or `scaler.step(optimizer)`) on every micro-batch of a
gradient-accumulation loop whose optimizer steps only at the window boundary. Also inside
`accelerator.accumulate()` with `Accelerator(gradient_accumulation_steps=N)`, for a GradScaler the
file builds itself: Accelerate skips the prepared optimizer's step on the micro-batches that only
accumulate, but not the scaler's `unscale_()` or `step()` (which unscales first), unless they run under
`if accelerator.sync_gradients:`.

## Why is this bad?
`unscale_()` divides the gradients accumulated so far by the current scale and marks the optimizer
as unscaled until the next `update()`. On the second micro-batch of the window it raises
"unscale_() has already been called on this optimizer since the last update()"; where it does not
(an `update()` on every micro-batch), the window's `.grad` mixes unscaled and scaled
contributions. `scaler.step()` on non-boundary micro-batches steps on partial windows; inside
`accumulate()`, where the optimizer's step is skipped there, it still unscales the partial sum each
time, so the window's earlier micro-batches are divided by the scale again (SGD, 4 micro-batches, scale 1024, on CPU: an
update of +0.1564 where +0.6250 was due, `benchmarks/results/accelerate-scaler-s31`).

## Fix
Move `scaler.unscale_(optimizer)` (and the clipping after it) into the step branch, right before
`scaler.step(optimizer)`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.fixes import move_before_steps
from loopcheck.model import FileModel, Kind, Role, Style, TrainingLoop
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.model.amp import custom_scaler, scaled_backwards, scaler_disabled, scaler_steps
from loopcheck.rules._base import Rule, Violation


class ScalerCallPerMicroBatch(Rule):
    code = "LC204"
    fixable = True
    message = "the GradScaler unscales or steps on every micro-batch of an accumulation window"

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    if (i + 1) % accum == 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(scaler.scale(model(batch).loss))
        if accelerator.sync_gradients:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # LC204
    if (i + 1) % accum == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """
while step < max_steps:
    for micro_step in range(grad_accum):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(*get_batch()) / grad_accum
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # LC204
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    step += 1
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(scaler.scale(model(batch).loss))
        scaler.step(optimizer)  # LC204
        scaler.update()
        optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style is Style.ACCELERATE:
                yield from self._in_accumulate(model, training)
                continue
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP):
                continue
            if not scaled_backwards(training.backwards, model.roles) or not scaler_steps(training.steps):
                continue
            if not all(training.guard(b).always for b in training.backwards):
                continue
            if training.style is Style.GUARDED and not all(training.guard(s).periodic for s in training.steps):
                continue
            for call in training.loop.events(Kind.SCALER_UNSCALE) + scaler_steps(training.loop.events(Kind.STEP)):
                if not training.guard(call).always:
                    continue
                what = "unscale_" if call.kind is Kind.SCALER_UNSCALE else "step"
                owner = call.receiver if call.kind is Kind.SCALER_UNSCALE else call.scaler
                # into the step branch, before its clipping too
                fix = move_before_steps(model, training, call, f"move `{owner}.unscale_()` into the step branch",
                                        also=(Kind.CLIP,)) if call.kind is Kind.SCALER_UNSCALE else None
                yield self.at(call, f"`{owner}.{what}()` runs on every micro-batch while the optimizer steps "
                                    f"only every N micro-batches ({training.style.value}): move it into the "
                                    "step branch", fix)

    def _in_accumulate(self, model: FileModel, training: TrainingLoop) -> Iterator[Violation]:
        """A GradScaler of the file's own inside ``accelerator.accumulate()``: Accelerate skips the prepared
        optimizer's step on the micro-batches that only accumulate, not the scaler's calls, so its
        ``step()`` unscales the window's partial sum on each of them."""
        if accumulation_setting(model) is None:
            return
        # (the prepared optimizer's step is Accelerate's, through the scaler or not)
        steps = [s for s in training.loop.events(Kind.STEP) if s.scaler]
        for call in training.loop.events(Kind.SCALER_UNSCALE) + steps:
            owner = call.receiver if call.kind is Kind.SCALER_UNSCALE else call.scaler
            if not call.in_context("accumulate") or not training.finite_guard(call).always or \
                    not model.roles.constructors(owner, Role.SCALER) or custom_scaler(model.roles, owner) or \
                    scaler_disabled(model.roles, owner):
                continue
            what = "unscale_" if call.kind is Kind.SCALER_UNSCALE else "step"
            yield self.at(call, f"`{owner}.{what}()` runs on every micro-batch inside `accelerator.accumulate()`, "
                                "which skips only the prepared optimizer's own step: the scaler unscales the "
                                "window's partial sum on each micro-batch, so the earlier ones are divided by the "
                                "scale again; call it under `if accelerator.sync_gradients:`")

