"""## What it does
Checks for gradient clipping (`clip_grad_norm_`, `clip_grad_value_`, or an in-place clamp of each
gradient such as the `clip_gradient(optimizer, clip)` helper's `param.grad.data.clamp_(-clip, clip)`,
in the file or in another module of the project) in a loop whose loss is back-propagated through a
GradScaler (`scaler.scale(loss).backward()`) with no `scaler.unscale_(optimizer)` before the clip.

## Why is this bad?
Until they are unscaled, the gradients are multiplied by the loss scale (65536 at the start, and
changing as the scaler adapts). `clip_grad_norm_(params, 1.0)` then compares a norm thousands of
times too large with the threshold and shrinks every step by a factor that follows the loss scale
instead of the gradients, and `clip_grad_value_` (or a clamp) clips almost everything: every
parameter then moves by about the same amount, whatever its gradient.

apex's `FP16_Optimizer` (`optimizer.backward(loss)`) scales the loss the same way and leaves the
fp16 model gradients scaled until its own `step()`: a `clip_grad_norm_` on the model's parameters
between the two compares scaled gradients with the threshold too (its `clip_master_grads(max_norm)`
is the clip it offers).

Lightning Fabric does the same under `Fabric(precision="16-mixed")` (also `"16"` or `16`): its
precision plugin holds a GradScaler, `fabric.backward(loss)` back-propagates the scaled loss, and the
gradients stay scaled until the wrapped optimizer's `step()`. A torch clip between the two is
flagged where the file builds that Fabric with such a precision, or with an option of its own whose
default or choices include it; `"bf16-mixed"` has no scaler, and on `accelerator="cpu"` Fabric runs
"16-mixed" as bf16.

A clip told the current loss scale (`clip_grad_norm_(params, max_norm * scaler.get_scale())`, a
helper called with `scale=scaler.get_scale()`) compares scaled gradients with a threshold scaled
alike: not flagged, and unscaling before it would make its threshold thousands of times too large.
Nor is a clip whose threshold the file pins at 1e9 or more, or at infinity (`MAX_GRAD_NORM or 1e9`
with `MAX_GRAD_NORM = None`): at a loss scale of 65536, a real gradient norm would have to pass 15,000
before it binds.

## Fix
Call `scaler.unscale_(optimizer)` right before clipping; `scaler.step(optimizer)` then knows the
gradients are unscaled and does not unscale them again. With Fabric, clip with
`fabric.clip_gradients(model, optimizer, max_norm=...)`, which unscales first.

A clip on every micro-batch of an accumulation window is also LC107: each micro-batch compares a
scaled partial sum with the threshold. Its fix is to move the clip into the step branch, after one
`unscale_`: a second `unscale_` before `scaler.update()` raises, so no fix is offered there.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Fix, insert_before, move_before, own_line
from loopcheck.model import Event, FileModel, Framework, GuardKind, Kind, Role, Roles, Style, TrainingLoop
from loopcheck.model.amp import backward_scaler, same_scaler, scaled_backwards, scaler_disabled
from loopcheck.model.fabric import loss_scaling
from loopcheck.model.guards import exclusive
from loopcheck.model.training import is_fabric_backward
from loopcheck.model.syntax import dotted, func_name, last_part, names_in, source
from loopcheck.rules._base import Rule, Violation


def _unscale_first(model: FileModel, clip: Event, scaler: str | None, training: TrainingLoop) -> Fix | None:
    """``scaler.unscale_(optimizer)`` right before the clip, when there is one optimizer and the clip
    is a statement of its own in the step's function: the loop's own ``unscale_`` moved there when it
    follows the clip, else a new one, under ``if scaler is not None:`` where the scaler may be None."""
    optimizers = {s.optimizer for s in training.steps}
    if scaler is None or len(optimizers) != 1 or not own_line(clip):
        return None
    optimizer = optimizers.pop()
    if optimizer is None or any(s.origin is not clip.origin for s in training.steps):
        return None
    message = f"unscale with `{scaler}.unscale_({optimizer})` first"
    existing = [u for u in training.step_loop.events(Kind.SCALER_UNSCALE, deep=True) if same_scaler(u.receiver, scaler)]
    if existing:  # never a second unscale_ on the same path: it raises
        [unscale] = existing if len(existing) == 1 else [None]
        if unscale is None or not own_line(unscale) or unscale.optimizer != optimizer or unscale.order < clip.order \
                or model.owner(unscale.stmt) is not model.owner(clip.stmt) or unscale.origin is not clip.origin:
            return None
        return move_before(unscale.stmt, clip.stmt, message)  # type: ignore[arg-type]
    guard = _scaled_when(model, training, clip, scaler)
    if guard is None:
        return None
    code = f"{scaler}.unscale_({optimizer})"
    return insert_before(clip.stmt, f"if {guard}:\n    {code}\n" if guard else code, message)


def _scaled_when(model: FileModel, training: TrainingLoop, clip: Event, scaler: str) -> str | None:
    """The condition under which the loss reaching the clip went through the scaler: ``""`` when
    it always did (the path calls the scaler, so it is not None there), the test of the branch
    that scales (``scaler is not None``, ``use_amp and scaler is not None``) when that test is the
    same on every iteration, else None. The new ``unscale_`` runs under it: exactly when there is
    something to unscale, and never on a None scaler."""
    extras = set()
    for backward in training.step_loop.events(Kind.BACKWARD, deep=True):
        if backward.order > clip.order or exclusive(backward.conds, clip.conds) or \
                not same_scaler(backward_scaler(backward, model.roles), scaler):
            continue
        extra = tuple(c for c in backward.conds if c not in clip.conds)
        # a flag reads INVARIANT, or ALWAYS in a variant of the loop that assumes it set
        if len(extra) > 1 or extra and (extra[0].test is None or training.reader.atom(
                extra[0].test, False, None, 0).kind not in (GuardKind.INVARIANT, GuardKind.ALWAYS)):
            return None
        extras.add(tuple((source(c.test), c.negated) for c in extra))  # type: ignore[arg-type]
    if len(extras) != 1:
        return None
    [extra] = extras
    if not extra:
        return ""
    [(test, negated)] = extra
    return f"not ({test})" if negated else test


class ClipBeforeUnscale(Rule):
    code = "LC201"
    fixable = True
    message = "gradients are clipped while still multiplied by the GradScaler's loss scale"

    VALID = [
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
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    if (i + 1) % accum == 0:
        if args.clip_grad > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    if use_amp:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
""",
        """
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", precision="16-mixed")
model, optimizer = fabric.setup(model, optimizer)
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    fabric.backward(loss)
    fabric.clip_gradients(model, optimizer, max_norm=1.0)
    optimizer.step()
""",
    ]
    INVALID = [
        """
optimizer = FP16_Optimizer(FusedAdam(model.parameters(), lr=3e-5), dynamic_loss_scale=True)
for tokens, labels in loader:
    loss = model(tokens, labels)
    model.zero_grad()
    optimizer.backward(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # LC201
    optimizer.step()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # LC201
    scaler.step(optimizer)
    scaler.update()
""",
        """
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    if (i + 1) % accum == 0:
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)  # LC201
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", precision="16-mixed")
model, optimizer = fabric.setup(model, optimizer)
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    fabric.backward(loss)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # LC201
    optimizer.step()
""",
        """
class Trainer:
    def _run_batch(self, source, targets, train=True):
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.use_amp):
            _, loss = self.model(source, targets)
        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.use_amp:
                self.scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # LC201
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
        return loss.item()

    def _run_epoch(self, loader, train=True):
        for source, targets in loader:
            self._run_batch(source, targets, train)
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style is Style.FRAMEWORK and "FP16_Optimizer" in model.source:
                yield from self._apex_fp16(training, model.roles)
            if training.style in (Style.FRAMEWORK, Style.ACCELERATE, Style.NO_STEP):
                continue
            yield from self._fabric_scaled(training, model)
            scaled = scaled_backwards(training.backwards, model.roles)
            if not scaled or all(scaler_disabled(model.roles, backward_scaler(b, model.roles)) for b in scaled):
                continue
            loop = training.step_loop
            unscales = loop.events(Kind.SCALER_UNSCALE, deep=True)
            if any("unscale" in (func_name(c) or "") for c in loop.opaque_calls):
                continue
            for clip in loop.events(Kind.CLIP, deep=True):
                if self._unscaled_clip(training, clip, scaled, unscales, model.roles):
                    scaler = backward_scaler(scaled[0], model.roles)
                    # A clip on every micro-batch (LC107 too) must not get an unscale_ of its own: a
                    # second unscale_ before the scaler's update() raises. Moving the clip is the fix.
                    every = training.accumulates and clip.loop is training.loop and training.guard(clip).always
                    yield self.at(clip, "gradients are clipped while still multiplied by the loss scale "
                                        f"(`{scaler}.scale(loss)` and no `{scaler}.unscale_(optimizer)` before "
                                        "the clip): the threshold is compared with scaled gradients",
                                  None if every else _unscale_first(model, clip, scaler, training))

    def _fabric_scaled(self, training: TrainingLoop, model: FileModel) -> Iterator[Violation]:
        """A torch clip between ``fabric.backward(loss)`` of a Fabric whose precision scales the loss
        (``Fabric(precision="16-mixed")``) and the optimizer step: Fabric unscales in the step, or in
        its own ``fabric.clip_gradients``, never for a clip it does not make."""
        loop = training.step_loop
        backwards = [b for b in loop.events(Kind.BACKWARD, deep=True) if is_fabric_backward(b)]
        if not backwards or any("unscale" in (func_name(c) or "") for c in loop.opaque_calls):
            return
        for clip in loop.events(Kind.CLIP, deep=True):
            if not self._plain_clip(clip, model.roles):
                continue
            for backward in backwards:
                when = loss_scaling(model, backward.receiver)
                if when is None or backward.order > clip.order or exclusive(backward.conds, clip.conds) \
                        or not any(s.order > clip.order and not exclusive(s.conds, clip.conds) for s in training.steps):
                    continue
                only = f" (only when {when})" if when else ""
                yield self.at(clip, f"gradients are clipped while still multiplied by the loss scale (`{backward.receiver}"
                                    ".backward(loss)` scales the loss with a GradScaler under 16-mixed precision and "
                                    "unscales only in the optimizer step): the threshold is compared with scaled "
                                    f"gradients; clip with `{backward.receiver}.clip_gradients(model, optimizer, "
                                    f"max_norm=...)`, which unscales first{only}")
                break

    @staticmethod
    def _plain_clip(clip: Event, roles: Roles) -> bool:
        """A clip that does not unscale first and is not told the scale: not Accelerate's or Fabric's
        own, not a helper handed the scaler or the optimizer, not a threshold times the scale."""
        owner = (clip.receiver or "").lower()
        called = func_name(clip.node) if isinstance(clip.node, cst.Call) else None
        if "accelerator" in owner or "fabric" in owner or called == "self.clip_gradients":
            return False
        if not isinstance(clip.node, cst.Call):
            return True
        if clip.target != "param" and any(roles.of(dotted(a.value)) in (Role.SCALER, Role.OPTIMIZER)
                                          for a in clip.node.args if dotted(a.value)):
            return False
        return not any(_reads_scaler(a.value, roles) for a in clip.node.args)

    def _apex_fp16(self, training: TrainingLoop, roles: Roles) -> Iterator[Violation]:
        """A clip between ``optimizer.backward(loss)`` of an apex ``FP16_Optimizer`` (the file builds the
        optimizer with it) and that optimizer's step, on parameters it is not handed the optimizer for
        (``clip_grad_norm_(model.parameters(), c)``, not ``clip_master_grads`` nor a helper given the
        optimizer): the fp16 gradients it clips are still multiplied by the loss scale."""
        loop = training.step_loop
        scaled = [b for b in loop.events(Kind.BACKWARD, deep=True)
                  if b.framework is Framework.ENGINE and isinstance(b.node, cst.Call) and _fp16_optimizer(b.receiver, roles)]
        for clip in loop.events(Kind.CLIP, deep=True) if scaled else ():
            if not isinstance(clip.node, cst.Call) or any(
                    roles.of(name) in (Role.OPTIMIZER, Role.SCALER) or "master" in name
                    for a in clip.node.args for name in names_in(a.value)):
                continue
            for backward in scaled:
                if backward.order < clip.order and not exclusive(backward.conds, clip.conds) and any(
                        s.optimizer == backward.receiver and s.order > clip.order and not exclusive(s.conds, clip.conds)
                        for s in training.steps):
                    yield self.at(clip, f"gradients are clipped while still multiplied by the loss scale "
                                        f"(`{backward.receiver}.backward(loss)` of apex's FP16_Optimizer leaves the "
                                        "fp16 model gradients scaled): clip through the wrapper "
                                        f"(`{backward.receiver}.clip_master_grads(max_norm)`, or FusedAdam's "
                                        "`max_grad_norm`)")
                    break

    @classmethod
    def _unscaled_clip(cls, training: TrainingLoop, clip: Event, scaled: list[Event], unscales: list[Event],
                       roles: Roles) -> bool:
        if not cls._plain_clip(clip, roles):
            return False
        if any(u.order < clip.order for u in unscales):
            return False
        before = [b for b in scaled if b.order < clip.order and not exclusive(b.conds, clip.conds)]
        after = [s for s in training.steps if s.order > clip.order and not exclusive(s.conds, clip.conds)]
        return bool(before) and bool(after)


def _fp16_optimizer(name: str | None, roles: Roles) -> bool:
    """The file builds ``name`` with apex's ``FP16_Optimizer(...)`` (on some path)."""
    return any(last_part(func_name(call) or "") == "FP16_Optimizer"
               for call in roles.constructed.get(last_part(name or ""), []))


def _reads_scaler(value: cst.BaseExpression, roles: Roles) -> bool:
    """An argument computed from the GradScaler (``scaler.get_scale()``): the clip or its helper is
    told the current loss scale, and compares scaled gradients with a threshold scaled alike."""
    return any(roles.of(name.rsplit(".", 1)[0]) is Role.SCALER for name in names_in(value) if "." in name)
