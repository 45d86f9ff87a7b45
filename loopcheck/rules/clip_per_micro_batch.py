"""## What it does
Checks for gradient clipping that runs on every micro-batch of an accumulation window, or after
the optimizer step, or between the zeroing and the backward, instead of once right before the step.
A clip after an `if`/`else` that steps in both branches (`if self.scaler: scaler.step(opt) else:
opt.step()`) is after the step (no fix: moved before one branch's step it would miss the other), and a
trainer's `self.model` is the `model` its caller built the optimizer over. A clip of a module after
another optimizer's step, before the step of its own (built over it by a class an option chooses,
`args.optimizer(self.map_style.parameters())`, as well as by `torch.optim.Adam`), is in time. A clip
after the step is wrong whatever the accumulation count, so its message names no setting. A clip
whose threshold the file pins at 1e9 or more, or at infinity (`MAX_GRAD_NORM or 1e9` with
`MAX_GRAD_NORM = None`, `max_norm=float("inf")`: the "no clipping" spelling), never binds: not flagged.

## Why is this bad?
Mid-window, `.grad` holds a partial sum: clipping it rescales some micro-batches and not others,
and the norm threshold no longer means what it says. Clipping after `step()` changes gradients
that were already applied (and are about to be zeroed): it has no effect at all. So does clipping
right after `zero_grad()` and before `backward()` (FAMO's weighting methods, aot-benchmark's fp32
branch): it clips zeros or `None`, and the step applies the gradients the backward then computes,
unclipped.

Inside `accelerator.accumulate(model)` the prepared optimizer skips the non-boundary steps, but
`accelerator.clip_grad_norm_` (like torch's) clips whatever `.grad` holds when it is called: it
needs `if accelerator.sync_gradients:` around it. Under that test after the `accumulate()` block,
it comes after the block's step: too late, as any clip after the step.

## Fix
Clip once, in the step branch, immediately before `optimizer.step()` (after
`scaler.unscale_(optimizer)` under AMP). Inside `accumulate()`, under `if accelerator.sync_gradients:`
before the step (no fix is offered there: a clip moved without that test would run on every
micro-batch).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Fix, move_before, move_before_steps, own_line, remove, step_region
from loopcheck.model import Event, FileModel, Kind, Style, TrainingLoop
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.model.guards import exclusive
from loopcheck.model.memory import module_name
from loopcheck.model.optimizers import optimizer_modules, parameter_owners
from loopcheck.model.syntax import last_part, source
from loopcheck.rules._base import Rule, Violation


class ClipPerMicroBatch(Rule):
    code = "LC107"
    message = "gradients are clipped on every micro-batch or after the step, not once before the step"
    fixable = True

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(**batch).loss)
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # LC107
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # LC107
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(**batch).loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)  # LC107
        optimizer.step()
        optimizer.zero_grad()
""",
        """
optD = torch.optim.Adam(netD.parameters())
optG = torch.optim.Adam(netG.parameters())
for real in loader:
    optD.zero_grad()
    (netD(netG(noise()).detach()).mean() - netD(real).mean()).backward()
    optD.step()
    torch.nn.utils.clip_grad_norm_(netD.parameters(), 1.0)  # LC107
    optG.zero_grad()
    (-netD(netG(noise())).mean()).backward()
    optG.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.GUARDED, Style.MICRO_LOOP) or (
                    training.style is Style.ACCELERATE and accumulation_setting(model) is not None):
                # accelerator.clip_grad_norm_ is not gated by accumulate(): only `if accelerator.sync_gradients:` is
                for clip in training.events(Kind.CLIP):
                    if not training.finite_guard(clip).always:
                        continue
                    fix = _clip_at_step(model, training, clip) if training.style is not Style.ACCELERATE else None
                    yield self.at(clip, "gradients are clipped on every micro-batch, on a partial sum of the "
                                        "window: clip once in the step branch, right before the step", fix)
            if training.style in (Style.PLAIN, Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE):
                owners = optimizer_modules(model)
                backwards = training.step_loop.events(Kind.BACKWARD, deep=True)  # an inner loop's too
                for clip in training.step_loop.events(Kind.CLIP):
                    steps = [s for s in training.steps
                             if _after_step(clip, s, backwards, training) and not _clips_another(clip, s, owners)]
                    if steps:
                        # (in `accumulate()` a clip moved before the step would run on every micro-batch:
                        # where it belongs, under `if accelerator.sync_gradients:`, is for the user to write)
                        fix = _clip_before(model, training, clip, steps[0]) \
                            if training.style is not Style.ACCELERATE else None
                        yield self.at(clip, "gradients are clipped after the optimizer step: the step already used "
                                            "them, so clipping has no effect", fix, needs_accumulation=False)
                        continue
                    if _between_zeroing_and_backward(training, clip, backwards, owners):
                        yield self.at(clip, "gradients are clipped after they were zeroed and before `backward()` "
                                            "computes them: clipping has no effect, and the step uses the "
                                            "unclipped gradients; clip after the backward, before the step",
                                      needs_accumulation=False)


def _clip_at_step(model: FileModel, training: TrainingLoop, clip: Event) -> Fix | None:
    """Move a per-micro-batch clip before the step (after the step branch's ``unscale_``)."""
    if any(u.order < clip.order and training.guard(u).always for u in training.events(Kind.SCALER_UNSCALE)):
        return None  # the unscale moves with it, or not at all: leave it to the user
    region = step_region(model, training, clip)
    if region is None or any(region.holds(u) for u in training.step_loop.events(Kind.SCALER_UNSCALE, deep=True)):
        return None  # an unscale_ inside the step statements would follow the moved clip
    return move_before_steps(model, training, clip, "move the clipping right before the optimizer step")


def _clip_before(model: FileModel, training: TrainingLoop, clip: Event, step: Event) -> Fix | None:
    """Move a clip that follows the step before it, or drop it where the same clip precedes the step."""
    earlier = [c for c in training.step_loop.events(Kind.CLIP, deep=True)
               if c is not clip and c.order < step.order and c.receiver == clip.receiver
               and not exclusive(c.conds, step.conds)]
    if not own_line(clip) or clip.origin is not step.origin:
        return None
    if earlier:
        if all(source(c.node) == source(clip.node) for c in earlier):
            return remove(clip.stmt, "remove the clipping after the step: the same clip runs before it")  # type: ignore[arg-type]
        return None
    if model.owner(clip.stmt) is not model.owner(step.stmt):
        return None
    return move_before(clip.stmt, step.stmt, "move the clipping before the optimizer step")  # type: ignore[arg-type]


def _after_step(clip: Event, step: Event, backwards: list[Event], training: TrainingLoop) -> bool:
    """The clip runs after ``step`` on every path through it: under the step's own conditions, or after
    an ``if``/``else`` that steps in both branches (``if self.scaler: scaler.step(opt) else:
    opt.step()``, then the clip), or under a flag the loop's variant fixes."""
    if step.closure or not step.order < clip.order or exclusive(step.conds, clip.conds):
        return False
    if step.conds != clip.conds[: len(step.conds)] and not _stepped_either_way(clip, step, training):
        return False
    return not any(step.order < b.order < clip.order for b in backwards)


def _stepped_either_way(clip: Event, step: Event, training: TrainingLoop) -> bool:
    """``step`` sits in one branch of an ``if``/``else`` that the clip follows, and another step of
    the same optimizer sits in the other branch; or the branch is the one the variant's flag takes."""
    depth = len(clip.conds)
    if len(step.conds) != depth + 1 or step.conds[:depth] != clip.conds:
        return False
    if step.loop is clip.loop and training.guard(step, step.conds[depth:]).always:
        return True
    mine = step.conds[depth]
    return any(other is not step and len(other.conds) == depth + 1 and other.conds[:depth] == clip.conds
               and other.conds[depth].owner is mine.owner and other.conds[depth].branch != mine.branch
               and last_part(other.optimizer or "") == last_part(step.optimizer or "") and other.order < clip.order
               for other in training.steps)


def _between_zeroing_and_backward(training: TrainingLoop, clip: Event, backwards: list[Event],
                                  owners: dict[str, set[str]]) -> bool:
    """The clip runs after a zeroing and before any backward (FAMO's ``optimizer.zero_grad()``, then
    ``clip_grad_norm_(...)``, then ``loss.backward()``; ``optimizer.step()``): wherever the clip runs,
    the zeroing ran first, and a backward and a step of the clipped parameters follow it."""
    zeros = [z for z in training.step_loop.events(Kind.ZERO_GRAD)
             if z.order < clip.order and z.conds == clip.conds[: len(z.conds)]]
    if not zeros:
        return False
    zero = max(zeros, key=lambda z: z.order)
    if any(zero.order < b.order < clip.order for b in backwards):
        return False
    later = [b for b in backwards if b.order > clip.order and not exclusive(b.conds, clip.conds)]
    return bool(later) and any(s.order > later[0].order and not s.closure and not exclusive(s.conds, clip.conds)
                               and not _clips_another(clip, s, owners) for s in training.steps)


def _clips_another(clip: Event, step: Event, owners: dict[str, set[str]]) -> bool:
    """The clipping is over the parameters of a module that ``step``'s optimizer does not hold
    (a GAN clips the generator after stepping the discriminator). ``self.model`` and ``model`` name one
    module: a trainer keeps what its caller built (``self.model = model`` in ``__init__``)."""
    clipped = {module_name(m).removeprefix("self.") for m in parameter_owners(clip.node)} \
        if isinstance(clip.node, cst.Call) else set()
    held = {h.removeprefix("self.") for h in owners.get(last_part(step.optimizer or ""), set())}
    return bool(clipped and held) and not any(
        c == h or c.startswith(h + ".") or h.startswith(c + ".") for c in clipped for h in held)
