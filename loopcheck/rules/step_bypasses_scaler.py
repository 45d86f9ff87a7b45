"""## What it does
Checks for `optimizer.step()` called directly after a backward pass through a GradScaler
(`scaler.scale(loss).backward()`), on an iteration where no `scaler.step(optimizer)` runs.

## Why is this bad?
The gradients are still multiplied by the loss scale (65536 at the start): SGD takes a step
thousands of times too large, and Adam's update is distorted wherever epsilon matters. Nothing
checks them for inf/NaN, so an overflow that `scaler.step()` would have skipped is written into
the weights. Even after `scaler.unscale_(optimizer)`, a direct step does not skip non-finite steps.

## Fix
Step through the scaler: `scaler.step(optimizer)` followed by `scaler.update()`. A deliberate
fp32 path (`if use_amp: scaler.step(optimizer) else: optimizer.step()`) is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Edit, Fix
from loopcheck.model import Event, FileModel, Kind, Style
from loopcheck.model.amp import backward_scaler, direct_steps, extra_conds, scaler_disabled, scaler_steps
from loopcheck.model.guards import exclusive
from loopcheck.model.syntax import last_part
from loopcheck.rules._base import Rule, Violation


class StepBypassesScaler(Rule):
    code = "LC203"
    fixable = True
    message = "the loss is scaled by a GradScaler but the optimizer is stepped directly"

    VALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
        """
for real, noise in loader:
    opt_d.zero_grad()
    loss_d = critic(real).mean() - critic(gen(noise).detach()).mean()
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss_g = -critic(gen(noise)).mean()
    scaler.scale(loss_g).backward()
    scaler.step(opt_g)
    scaler.update()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()  # LC203
""",
        """
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    if (i + 1) % accum == 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()  # LC203
        scaler.update()
        optimizer.zero_grad()
""",
        """
scaler = make_grad_scaler()
for batch in train_loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        outputs = model(**batch)
    loss = scaler.scale(outputs.loss)
    loss.backward()
    optimizer.step()  # LC203
    optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.ACCELERATE, Style.NO_STEP):
                continue
            backwards = sorted(training.step_loop.events(Kind.BACKWARD, deep=True), key=lambda e: e.order)
            through_scaler = scaler_steps(training.steps)
            for step in direct_steps(training.steps):
                feeding = _feeding_backward(step, backwards)
                scaler = backward_scaler(feeding, model.roles) if feeding is not None else None
                if scaler is None or scaler_disabled(model.roles, scaler):
                    continue
                if any(last_part(s.optimizer or "") == last_part(step.optimizer or "") for s in through_scaler):
                    continue  # an fp32 alternative to scaler.step (exclusive), or a double step (LC109)
                updates = training.step_loop.events(Kind.SCALER_UPDATE, deep=True)
                # a wrapper of another project module that steps: rewriting its call would drop the rest of it
                elsewhere = model.project.where(step.node) if model.project is not None else None
                # `scaler = GradScaler() if amp else None` with a step that also runs where the scaled
                # backward does not: `scaler.step(...)` there would be a call on None
                may_be_none = last_part(scaler) in model.roles.maybe_none and bool(extra_conds(feeding, step))  # type: ignore[arg-type]
                yield self.at(step, f"`{step.optimizer}.step()`{f' (in {elsewhere})' if elsewhere else ''} "
                                    f"applies gradients scaled by `{scaler}.scale(loss)`: step through "
                                    f"`{scaler}.step({step.optimizer})` so they are unscaled and inf/NaN "
                                    "steps are skipped",
                              None if elsewhere or may_be_none else _through_scaler(step, scaler, needs_update=not updates))


def _through_scaler(step: Event, scaler: str, needs_update: bool) -> Fix | None:
    """``optimizer.step()`` -> ``scaler.step(optimizer)`` (and ``scaler.update()`` after it when the
    loop never updates the scaler: a second ``scaler.step`` before an update raises)."""
    if step.closure or not isinstance(step.node, cst.Call) or not isinstance(step.stmt, cst.SimpleStatementLine):
        return None
    edits = [Edit(step.node, replacement=cst.parse_expression(f"{scaler}.step({step.optimizer})"))]
    if needs_update:
        edits.append(Edit(step.stmt, after=(cst.parse_statement(f"{scaler}.update()"),)))
    return Fix(f"step through `{scaler}.step({step.optimizer})`", tuple(edits))


def _feeding_backward(step: Event, backwards: list[Event]) -> Event | None:
    """The last backward before ``step`` that can run on the same iteration."""
    before = [b for b in backwards if b.order < step.order and not exclusive(b.conds, step.conds)]
    return before[-1] if before else None
