"""## What it does
Checks for gradients being zeroed on every micro-batch of a gradient-accumulation loop: by the
optimizer, the model, or `p.grad = None`. A LightningModule under manual optimization that
accumulates by hand (`self.manual_backward(loss)`, `opt.step()` every N batches in
`training_step`) is checked the same way: Lightning leaves its zeroing and stepping as written.
So is a trainer's per-step method, called once per micro-batch (or per list of them) by a loop
elsewhere, that steps only on the calls its caller does not mark as accumulation steps (`if not
self.is_grad_accumulation_step: optimizer.step()`) and zeroes the gradients on every call before
its backward: each step then sees the last call's gradients only (not where this file gives its
`Accelerator` an accumulation count, whose prepared optimizer skips `zero_grad()` on those calls).
A backward that runs now and then and is cleared in its own branch before any step (a probe's
`probe_loss.backward(); optimizer.zero_grad()`) feeds no window and is left out, and so is a part of
the stepped model zeroed after every backward (`model.teacher.zero_grad()`: data2vec's EMA teacher
takes no gradient step): it is kept out of every step on purpose. Nor is a loop whose accumulation
count the file ships as 1 (`config = {"grad_accum": 1}`, a constant; a command-line default is an
option, and the finding says "only when > 1"): every micro-batch steps.

## Why is this bad?
Under accumulation the optimizer steps only every N micro-batches and relies on `backward()`
summing the gradients of the whole window. Zeroing on every micro-batch throws away N-1 of the N
backward passes: each step sees one micro-batch, at N times the compute. Nothing crashes; the
model just trains worse. Inside `accelerator.accumulate()` a prepared optimizer's `zero_grad()`
is gated by Accelerate, but `model.zero_grad()` is not. The gate opens on the micro-batch the
optimizer steps on, from the moment `accumulate()` is entered: a prepared optimizer's `zero_grad()`
at the top of the block, before the backward (the order of an early Accelerate example), clears the
window's first N-1 micro-batches there, and each step sees the last one only (with an accumulation
count given to the `Accelerator`; before the block, or after the step, it is right).

## Fix
Move the zeroing into the step branch, after `optimizer.step()` (or guard it with the window
start, `if i % N == 0:`). Where the zeroing happens inside a function of another module of the
project, no fix is offered: moving that call would move all it does with it (its forward, backward
or own step). A zeroing inside a method that also steps an optimizer its class builds itself (DARTS's
`architect.step()`, Adam over the architecture parameters) clears only that optimizer's gradients
and is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_to_step
from loopcheck.model import Event, FileModel, Guard, GuardKind, Kind, Loop, Style, TrainingLoop
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.model.guards import ACCUMULATING_CALL
from loopcheck.model.optimizers import Zeroing
from loopcheck.model.syntax import call_text, dotted, source, walk
from loopcheck.model.values import accumulation_gates_nothing
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
            if training.style is Style.MICRO_LOOP:
                yield from self._across_calls(training, model)
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE):
                continue
            backwards = [b for b in training.backwards if not _cancelled(training, b)]
            if not backwards or not all(training.every_iteration(b) for b in backwards):
                continue
            if accumulation_gates_nothing(training, model.index):
                continue  # N is 1 as shipped (`config = {"grad_accum": 1}`): every micro-batch steps
            # a step method whose caller marks the calls that only accumulate
            flag = training.step_guard if training.style is Style.GUARDED and not training.loop.is_loop and \
                training.step_guard is not None and _marked_by_caller(training.step_guard) else None
            zeroing = Zeroing(model, {s.optimizer for s in training.steps if s.optimizer})
            for zero in training.events(Kind.ZERO_GRAD):
                if training.guard(zero).kind not in (GuardKind.ALWAYS, GuardKind.NOT_PERIODIC):
                    continue  # the `else:` of the step condition zeroes every non-boundary micro-batch
                if _kept_out(zeroing, training, zero, backwards):
                    continue  # one part of the stepped model kept out of every step (an EMA teacher)
                if training.steps and all(zeroing.clears(zero, step) is False for step in training.steps):
                    continue  # another optimizer's (`architect.optimizer`, built by the Architect for itself)
                if training.style is Style.ACCELERATE and zero.target == "optimizer":
                    # Accelerate's prepared optimizer skips zero_grad on non-sync steps, but on the
                    # sync step one before the backward clears the whole window
                    if _before_backward_in_accumulate(model, zero, backwards):
                        yield self.at(zero, f"`{zero.receiver}.zero_grad()` runs before the backward inside "
                                            "`accelerator.accumulate()`: the prepared optimizer zeroes only on the "
                                            "micro-batch it steps on, so there it clears the N-1 micro-batches "
                                            "accumulated before it and each step sees the last micro-batch only; "
                                            "zero after the optimizer step")
                    continue
                # a method or function of another project module: the message names where it zeroes, and
                # no fix moves the call, which does more than zero (forward, backward, its own step)
                elsewhere = model.project.where(zero.node) if model.project is not None else None
                fix = move_to_step(model, training, zero, "move the zeroing after the optimizer step") \
                    if training.style is not Style.ACCELERATE and not elsewhere else None
                if flag is not None:
                    if not _gated(model, zero):
                        yield self.at(zero, _across_message(zero, training.loop, flag), fix)
                    continue
                through = f" (by `{call_text(zero.node)}`, {elsewhere})" if elsewhere else ""
                gradients = f"gradients (`{zero.receiver}.grad`)" if zero.target == "param" \
                    and type(zero.node) is not cst.Call else f"`{zero.receiver}` gradients"  # `p.grad = None`
                yield self.at(zero, f"{gradients} are zeroed{through} on every micro-batch while the "
                                    f"optimizer steps every N micro-batches ({training.style.value}): "
                                    "N-1 of N backward passes are thrown away", fix)

    def _across_calls(self, training: TrainingLoop, model: FileModel) -> Iterator[Violation]:
        """A step method whose own loop back-propagates a list of micro-batches (zeroed once before
        it, stepped after it: right within one call) but steps only on the calls its caller does not
        mark as accumulation steps (``if not self.is_grad_accumulation_step:``): a zeroing before that
        loop on every call throws away what the calls before it accumulated."""
        scope = training.loop.parent
        if scope is None or scope.is_loop or scope.function is None or not training.steps:
            return
        guards = [training.guard(step) for step in training.steps]
        if not all(g.kind is GuardKind.SYNC and _marked_by_caller(g) for g in guards):
            return
        for zero in scope.events(Kind.ZERO_GRAD):
            if zero.order < training.loop.order and training.guard(zero).always and not _gated(model, zero):
                yield self.at(zero, _across_message(zero, scope, guards[0]))


def _before_backward_in_accumulate(model: FileModel, zero: Event, backwards: list[Event]) -> bool:
    """A prepared optimizer's ``zero_grad()`` inside ``with accelerator.accumulate(model):`` and before
    the iteration's backward, where the ``Accelerator`` accumulates (``gradient_accumulation_steps=N``):
    ``accumulate()`` sets ``sync_gradients`` on entering the window's last micro-batch, and the
    prepared optimizer zeroes exactly then (before ``zero_grad()`` followed the step, this clears the
    window). Outside the block, before it, the zeroing still sees the previous iteration's flag: it
    clears right after a step, which is right."""
    return any(c.kind == "accumulate" for c in zero.contexts) and all(zero.order < b.order for b in backwards) \
        and accumulation_setting(model) is not None


def _kept_out(zeroing: Zeroing, training: TrainingLoop, zero: Event, backwards: list[Event]) -> bool:
    """``model.teacher.zero_grad()`` after every backward of the iteration, where the optimizer steps
    all of ``model``: that part never has gradients when a step runs, on any micro-batch (data2vec's
    EMA teacher, updated by its own rule); the rest of the model accumulates as it should."""
    return zero.order > max(b.order for b in backwards) and zero.loop is training.loop \
        and any(zeroing.partial(zero, step) for step in training.steps)


def _cancelled(training: TrainingLoop, backward: Event) -> bool:
    """A backward that runs only now and then and whose gradients a zeroing in its own branch clears
    before any step (a probe's `probe_loss.backward(); optimizer.zero_grad()` to record activation and
    gradient statistics): it feeds no window, so the windows are read from the other backwards."""
    if training.every_iteration(backward):
        return False
    steps = [s.order for s in training.events(Kind.STEP)]
    return any(z.conds == backward.conds and backward.order < z.order and z.target in ("optimizer", "model")
               and not any(backward.order < s < z.order for s in steps) for z in training.events(Kind.ZERO_GRAD))


def _across_message(zero: Event, scope: Loop, flag: Guard) -> str:
    name = scope.function.name.value if scope.function is not None else "the step function"
    return (f"`{zero.receiver}` gradients are zeroed on every call of `{name}`, but the optimizer steps only on the "
            f"calls that `{source(flag.test)}` does not mark as accumulation steps: the gradients of the calls "
            "before are thrown away")


def _gated(model: FileModel, zero: Event) -> bool:
    """An optimizer's ``zero_grad()`` where this file gives its Accelerator an accumulation count: a
    prepared optimizer skips it on the calls ``accumulate()`` does not sync."""
    return zero.target == "optimizer" and accumulation_setting(model) is not None


def _marked_by_caller(guard: Guard) -> bool:
    """The guard tests a flag the caller sets before each call (``self.is_grad_accumulation_step``)."""
    return guard.test is not None and any(ACCUMULATING_CALL.match(dotted(n) or "") for n in walk(guard.test)
                                          if isinstance(n, cst.Attribute))
