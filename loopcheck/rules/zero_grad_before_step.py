"""## What it does
Checks for gradients cleared after `backward()` and before the `optimizer.step()` that should
use them.

## Why is this bad?
The step then sees zero (or `None`) gradients: the optimizer does nothing, or only applies
weight decay and momentum. The loss curve stays flat and nothing errors. A zeroing between two
backward passes that feed one step (`loss_a.backward(); opt.zero_grad(); loss_b.backward();
opt.step()`) throws away the first loss: only the second one trains the model. Copying the first
gradients out before the zeroing and combining them by hand (gradient surgery) is not flagged,
nor is clearing one submodule of the stepped model between the passes (`model.codebook.zero_grad()`:
VQ-VAE trains its codebook by the VQ loss alone) or after the last one (`model.teacher.zero_grad()`:
an EMA teacher inside the stepped model takes no gradient step), nor a zeroing only under a test of
the gradients themselves (`if not torch.isfinite(total_norm) or total_norm > max_norm:` with
`total_norm` from `clip_grad_norm_`): that skips one update on purpose.

Under accumulation, a zeroing under the step's own test (`if update_grad: optim.zero_grad()`, true on
the window's last micro-batch) placed before that micro-batch's backward clears the N-1 micro-batches
accumulated before it: each step uses the last one only (checked on CPU: the step's gradient equals
the last micro-batch's). A zeroing under a test of the window's first micro-batch (`it % N == 0`) is
right. Nor is zeroing a module
built apart from the one the stepped optimizer is built over, each by a call that names nothing of
the other (an fp16 copy, `gpu_model = GPT2LMHeadModel.from_pretrained(name).half()`, whose gradients
were copied into the fp32 `cpu_model` of `optimizer = Adam(cpu_model.parameters())`): the step's
gradients are not the ones cleared. A wrapper or a part of the stepped model (`model = DDP(net)`,
`half = master.half()`, the same module) is. Nor is a zeroing followed, before the step, by
gradients written by hand (REINFORCE: `alpha.grad.data.zero_()`, then `alpha.grad.data += (reward -
baseline) * saved[j]`): the step applies those.

A same-file helper that zeroes the optimizer it is passed (`reset_grad(optimizer)`) is read at
its call, and so is an epoch function's optimizer parameter, for its zeroing and its step alike
(`train(net, loader, train_optimizer)` called with `optimizer`, a GAN's `optimizer_G` and
`optimizer_D` called with `optimizer_gen` and `optimizer_disc`).

## Fix
Zero the gradients before `backward()` or after `optimizer.step()`, never between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from loopcheck.latent import setting_note
from loopcheck.model import Event, FileModel, Framework, Kind, Loop, Style, TrainingLoop
from loopcheck.model.guards import exclusive
from loopcheck.model.optimizers import Zeroing
from loopcheck.model.windows import zeroed_before_the_last_backward
from loopcheck.model.syntax import func_name, last_part, names_in, source, target_names, walk
from loopcheck.patterns import Pattern
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
        """
def reset_grad(opt):
    opt.zero_grad()

for real, _ in loader:
    errD = criterion(netD(real), ones) + criterion(netD(netG(noise()).detach()), zeros)
    errD.backward()
    optimizerD.step()
    reset_grad(optimizerD)
    errG = criterion(netD(netG(noise())), ones)
    errG.backward()
    reset_grad(optimizerD)
    optimizerG.step()
    reset_grad(optimizerG)
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
def reset_grad(opt):
    opt.zero_grad()

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    reset_grad(optimizer)  # LC104
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
                    if not _clears(zeroing, zero, step, optimizers):
                        continue
                    if _between(zero, max(feeding), step):
                        if _skips_bad_gradients(zero, training.step_loop):
                            continue  # the update is skipped on purpose: its gradients are too large or not finite
                        if zeroing.partial(zero, step):
                            continue  # one part of the stepped model kept out of the step (an EMA teacher)
                        if _written_by_hand(training.step_loop, zero, step):
                            continue  # REINFORCE: the cleared gradients are rebuilt from saved ones
                        if _listed_parameters(model, training.step_loop, zero):
                            continue  # `for p in actor_params: p.grad = None`: the parameters shared with another update
                        yield self._at(zeroing, zero, "clears the gradients after backward and before "
                                                      f"`{step.receiver}` steps: the step uses no gradients", model)
                    elif not zeroing.partial(zero, step) and zeroed_before_the_last_backward(training, zero, step):
                        yield self._at(zeroing, zero, f"runs under `{step.receiver}`'s own step test, before the "
                                                      "backward of the window's last micro-batch: it clears the N-1 "
                                                      "micro-batches accumulated before it, so each step uses the "
                                                      "last one only; zero after the step"
                                                      + setting_note(model, training.guard(step).modulus), model)
                    elif not zeroing.partial(zero, step) and (wiped := _wiped(training, zeroing, zero, step)) is not None:
                        yield self._at(zeroing, zero, f"runs between `{source(wiped.node)}` and the later backward "
                                                      f"that `{step.receiver}` steps on: the first backward's "
                                                      "gradients are cleared before any step uses them", model)

    def _at(self, zeroing: Zeroing, zero: Event, says: str, model: FileModel | None = None) -> Violation:
        """At the zeroing, or at the helper call that zeroes the optimizer it is passed
        (``reset_grad(optimizer_d)``): there the helper is misplaced, not wrong."""
        elsewhere = model.project.where(zero.node) if model is not None and model.project is not None else None
        if elsewhere:  # a method of a base class in another module: the call is what is misplaced
            return self.at(zero, f"`{source(zero.node)}` (zeroing `{zero.receiver}`, {elsewhere}) {says}")
        if zero.site is not None and zeroing.as_called(zero) is not zero:
            call, stmt = zero.site
            return Violation(call, stmt, f"`{source(call)}` (through `{source(zero.node)}`) {says}")
        return self.at(zero, f"`{source(zero.node)}` {says}")


# What measures the gradients a step would apply: `total_norm = clip_grad_norm_(params, max_norm)`
_GRAD_NORMS = {"clip_grad_norm_", "clip_grad_norm", "get_grad_norm", "grad_norm", "global_norm", "total_norm"}


def _skips_bad_gradients(zero: Event, loop: Loop) -> bool:
    """The zeroing runs only under a test of the gradients themselves (their norm as ``clip_grad_norm_``
    returned it, a ``.grad``): ``if not torch.isfinite(norm) or norm > limit: opt.zero_grad(set_to_none=True)``
    before ``scaler.step(opt)`` skips that update on purpose and keeps the GradScaler's bookkeeping."""
    tests = [c.test for c in zero.conds if c.test is not None]
    if any(re.search(r"\.grad\b", source(test)) for test in tests):
        return True
    read = {n for test in tests for n in names_in(test)}
    return any(set(a.names) & read and isinstance(a.value, cst.Call)
               and last_part(func_name(a.value) or "") in _GRAD_NORMS for a in loop.assignments)


def _written_by_hand(loop: Loop, zero: Event, step: Event) -> bool:
    """The loop writes a gradient itself between the zeroing and the step (``p.grad = g``,
    ``p.grad.data += (reward - baseline) * saved[j]``, ``p.grad.data /= n``), or has a helper write
    them (FedNova's ``model = assign_grads(model, grad_batch)`` of the gradients flattened out before
    the zeroing): the step applies that."""
    return any(zero.order < a.order < step.order and a.op != "for"
               and (any(n.endswith((".grad", ".grad.data")) for n in a.names)
                    and not (isinstance(a.value, cst.Name) and a.value.value == "None")
                    or type(a.value) is cst.Call and _GRADS_WRITER.search(last_part(func_name(a.value) or "")))
               for a in loop.assignments)


# `assign_grads(model, g)`, `set_flat_grad(params, g)`, `load_gradients(...)`: a helper writing gradients
_GRADS_WRITER = Pattern(r"^_?(?:assign|set|load|restore|write|put|copy|unflatten)_?(?:flat_?)?grad(?:s|ients?)?$", re.I)


_PARAMETERS = Pattern(r"\.(?:named_)?parameters\(|param_groups")


def _listed_parameters(model: FileModel, loop: Loop, zero: Event) -> bool:
    """``for param in actor_params: param.grad = None``: a list of parameters the file builds itself
    (never from a ``parameters()`` call), cleared so that the step leaves them alone (sb3's TRPO keeps the
    critic's update off the parameters it shares with the actor)."""
    if zero.target != "param":
        return False
    for node in walk(loop.node):
        if type(node) is cst.For and type(node.iter) is cst.Name and zero.receiver in target_names(node.target) \
                and any(n is zero.node for n in walk(node.body)):
            values = model.index.values.get(node.iter.value, [])  # (none for a parameter: unknown)
            return bool(values) and not any(_PARAMETERS.search(source(v)) for v in values)
    return False


def _wiped(training: TrainingLoop, zeroing: Zeroing, zero: Event, step: Event) -> Event | None:
    """A backward whose gradients ``zero`` clears before ``step`` and before any other step consumes
    them (``loss_a.backward(); opt.zero_grad(); loss_b.backward(); opt.step()``): the backward is
    wasted. Not where the loop reads or writes gradients by hand in between (per-loss gradients
    collected and combined, as in gradient surgery)."""
    loop = training.step_loop
    later = [b for b in loop.events(Kind.BACKWARD, deep=True) if zero.order < b.order < step.order]
    if not later or not _between(zero, zero.order - 1, step):
        return None
    stepping = loop.events(Kind.STEP, deep=True)
    others = [s for s in stepping if s.receiver != step.receiver]
    steps = [s.order for s in stepping]
    for backward in loop.events(Kind.BACKWARD, deep=True):
        if backward.order >= zero.order or backward.framework is not Framework.TORCH or backward.loop is not zero.loop \
                or backward.origin is not zero.origin:
            continue  # a helper's backward (input gradients for an adversarial example, a saliency map)
        if any(not _cleared_before(zeroing, loop, backward, other) for other in others):
            continue  # another optimizer (a GAN's generator) may step on this backward's gradients
        if exclusive(backward.conds, zero.conds) or backward.conds != zero.conds[: len(backward.conds)]:
            continue  # the zeroing must run whenever the backward ran
        if any(backward.order < s < zero.order for s in steps):
            continue  # a step consumed them first
        if any(backward.order < a.order < step.order and ".grad" in source(a.value) for a in loop.assignments):
            return None
        if _retains_graph(backward) and any(_loss_terms(loop, backward) & _sources(loop, b) for b in later):
            return None  # an auxiliary first pass: the later loss is rebuilt from the first loss's terms
        return backward
    return None


def _cleared_before(zeroing: Zeroing, loop: Loop, backward: Event, other: Event) -> bool:
    """The gradients ``backward`` leaves are certainly cleared for ``other``'s optimizer before ``other``
    steps (dcgan: `netG.zero_grad()` before `optimizerG.step()`, after the discriminator's backward),
    in this iteration or, for a step placed before the backward, in the next."""
    if not other.optimizer:
        return False
    for zero in loop.events(Kind.ZERO_GRAD, deep=True):
        if zeroing.clears(zero, other) is not True or exclusive(zero.conds, other.conds) or \
                zero.conds != other.conds[: len(zero.conds)]:
            continue  # it must run whenever the other step runs
        if backward.order < zero.order < other.order or \
                other.order < backward.order and (zero.order > backward.order or zero.order < other.order):
            return True
    return False


def _retains_graph(backward: Event) -> bool:
    return isinstance(backward.node, cst.Call) and any(
        a.keyword is not None and a.keyword.value == "retain_graph" and source(a.value) != "False"
        for a in backward.node.args)


def _loss_terms(loop: Loop, backward: Event) -> set[str]:
    """The names assigned in ``loop`` that ``backward``'s loss expression reads itself
    (``torch.mean(per_sample).backward()`` -> ``per_sample``; ``loss_a.backward()`` -> ``loss_a``)."""
    return names_in(backward.loss) & {n for a in loop.assignments for n in a.names} if backward.loss is not None \
        else set()


def _sources(loop: Loop, backward: Event) -> set[str]:
    """The names assigned in ``loop`` that ``backward``'s loss is computed from, two assignments deep
    (``loss = torch.sum(coef * per_sample)`` -> ``coef``, ``per_sample``): ghost clipping back-propagates
    ``mean(per_sample)`` with ``retain_graph=True`` to measure per-sample norms, clears the gradients and
    back-propagates ``sum(coef * per_sample)``, whose terms are the first loss's. Two losses of one
    forward (``loss_a`` and ``loss_b`` of ``out``) share ``out``, not the first loss's terms."""
    if backward.loss is None:
        return set()
    assigned = {n for a in loop.assignments for n in a.names}
    names = names_in(backward.loss)
    for _ in range(2):
        names |= {n for name in names & assigned for a in loop.assignments_before(name, backward.order)
                  for n in names_in(a.value)}
    return names & assigned


def _between(zero: Event, last_backward: int, step: Event) -> bool:
    if not last_backward < zero.order < step.order or exclusive(zero.conds, step.conds):
        return False
    # the zeroing must run whenever the step runs: same branch or unconditional around it
    return zero.conds == step.conds[: len(zero.conds)]


def _clears(zeroing: Zeroing, zero: Event, step: Event, optimizers: set[str | None]) -> bool:
    """Certainly the gradients ``step`` uses: its own optimizer or module, or the loop's only optimizer."""
    clears = zeroing.clears(zero, step)
    return clears is True or clears is None and zero.target != "optimizer" and len(optimizers) == 1
