"""## What it does
Checks for training loops that step an optimizer but never clear the gradients. A loop that hands
the optimizer to a call the model cannot see into may clear them there and is left alone, as is one
that calls a method defined in no function of the file on the object holding the optimizer
(`trainer.train_step(batch)` beside `scaler.step(trainer.optimizer)`); helpers
that only read it are seen through: a function of the same file with no training event that hands
it on to nothing (`adjust_learning_rate(optimizer, epoch)` writing `param_group["lr"]`,
`save_checkpoint(model, optimizer)` saving its `state_dict()`), a function of another project
module (its facts show any clearing), a class built around it (a scheduler), Python built-ins
(`hasattr`), apex's `amp.scale_loss`. A Lightning Fabric loop (`fabric.backward(loss)`) steps and
zeroes in its own code, so it is read as written. A method with no loop of its own (`GAN.step(self,
data)`) is read as one iteration where the file builds its object (`gan = GAN(...)`) and calls it only
inside loops that clear nothing and hand the object to no other call (`for data in loader:
gan.step(data)`). Optimizers that share a last name (`self.generator.optimizer`,
`self.discriminator.optimizer`) are told apart by their full path. An optimizer built afresh on every
step (over a fresh tensor, stepped once) carries nothing; one built per run of a training function that
a loop around it calls (`for fold in range(5): train(...)`) is stepped many times before the next is
built, and is checked as any other; a zeroing that function runs once per call, before its own epoch
and batch loops, clears nothing between the steps of those loops. An options object named like an
optimizer (`opt = opts.parse_opt()`) handed to a call is no optimizer. The batch loop may also run its backward and step in a function of
another project module it hands the optimizer (`engine.step(model=model, optimizer=optimizer,
loss=loss)`): the finding then names that function's file and line.

## Why is this bad?
`backward()` adds into `.grad`. Without `optimizer.zero_grad()` (or `model.zero_grad()`,
`p.grad = None`) every step uses the sum of all gradients since training started: the updates
grow without bound and training diverges or stalls, silently. A zeroing under `if N == 1:` clears them for a
step in the `else:` of `if N > 1:` (a count of micro-batches is never below 1). Gradients written by assignment over the
parameters before the step (A3C's workers copy theirs onto the shared model: `for lp, gp in
zip(local.parameters(), shared.parameters()): gp.grad = lp.grad.clone()`) are replaced, not added up.

A loop that steps on every batch while the gradients are cleared only once per pass of the loop
around it (`for epoch ...: optimizer.zero_grad()`, then `for batch in loader: ... loss.backward();
optimizer.step()`) is flagged too: each step of an epoch re-applies the gradients of the epoch's
earlier batches.

A loop that steps on every micro-batch but clears the gradients only under an accumulation condition
(`optimizer.step()` after every backward, `if (step + 1) % N == 0: optimizer.zero_grad()`) is flagged
too: each step but the first of a window re-applies the gradients of micro-batches already stepped on.
So is a zeroing that runs only when a scheduler is set (`optimizer.step()` then `if scheduler:
scheduler.step(); optimizer.zero_grad()`, the zeroing indented one level too deep): a run without a
scheduler never clears the gradients.
Not where the step is a loss-scaling helper's (`loss_scaler(loss, optimizer, ...)`) that may itself step
only at the window's end: its `__call__` in this file steps under a test, or, out of sight, the loop
hands it the iteration counter first (`loss_scaler.set_iters(i)`).

Not flagged: a loop that trains a module its function builds and then throws away, reading nothing
it computes but the loss it back-propagates (a timing or memory benchmark, its steps also in a
`try`/`with` block, the module's parameter count or attributes read as numbers or text before them;
also a module taken from an object, `net = modul.net`, where the loop feeds it only tensors the
function makes up, `x = torch.ones(...)`: a throughput test's warm-up and timed rounds, through a
GradScaler or not): how it trains changes nothing anyone sees. Nor a loop in a pytest test (a
`test_*` function, or a unittest method `testNumericBatchNorm`, in a `test_*.py` or `*_test.py` file,
or under a `tests/` folder, or a helper of such a file that only `test_*` functions call): its few
steps check a property of the gradients on purpose (two
modules' identically accumulated gradients, an optimizer wrapper's update), and no model it trains is
used afterwards. An evaluation function called `test` in a training script is no pytest test.

## Fix
Call `optimizer.zero_grad()` once per optimizer step, after `optimizer.step()`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.latent import setting_note
from loopcheck.model import Cond, Event, FileModel, Framework, GuardKind, Kind, Loop, Style, TrainingLoop
from loopcheck.model.batch_callers import per_batch_calls
from loopcheck.model.guards import Guard, flag_form
from loopcheck.model.discarded import result_discarded
from loopcheck.model.syntax import (call_text, children, dotted, exit_statement, func_name, keyword, last_part, lines,
                                   names_in, own_call_name, source, walk)
from loopcheck.model.optimizers import Zeroing
from loopcheck.model.pytest_tests import in_pytest_test
from loopcheck.model.scaler_counter import told_the_iteration
from loopcheck.rules._base import Rule, Violation


def _nest(loop: Loop | None) -> Iterator[Loop]:
    """The loop and the loops around it (not the function around them: zeroing once before the
    loop starts does not clear anything between steps)."""
    while loop is not None and loop.is_loop:
        yield loop
        loop = loop.parent


# methods of a module, which clear no optimizer's gradients
_MODULE_METHODS = frozenset({"train", "eval", "parameters", "named_parameters", "state_dict", "load_state_dict",
                             "to", "cuda", "cpu", "forward", "modules", "children", "apply", "half", "float",
                             "requires_grad_"})


def _holder_runs_unseen_method(model: FileModel, loop: Loop, step: Event) -> bool:
    """The loop calls a method of the object that holds the stepped optimizer (``trainer.train_step(batch)``
    beside ``scaler.step(trainer.optimizer)``), defined in no function of this file: whatever it does to
    the optimizer it holds, zeroing included, is out of sight."""
    holder = (step.receiver or "").rpartition(".")[0]
    if not holder or holder == "self":
        return False  # (the file's own methods are read at their calls, a base class's through its facts)
    for node in walk(loop.node):
        if type(node) is cst.Call and isinstance(node.func, cst.Attribute) and dotted(node.func.value) == holder:
            name = node.func.attr.value
            if name not in _MODULE_METHODS and name not in model.index.functions:
                return True
    return False


def _helper_zeroing(model: FileModel, scope: Loop) -> list[Event]:
    """Zeroing in the same-file helpers a step function calls (``self._zero_grad()``, whose loop over
    the optimizers makes it a scope of its own rather than code inlined at the call)."""
    if scope.function is None:
        return []
    scopes = {s.function: s for s in model.scopes if s.function is not None}
    found: list[Event] = []
    for node in walk(scope.function.body):
        if not isinstance(node, cst.Call):
            continue
        name = own_call_name(node)
        fns = model.index.functions.get(name, []) if name else []
        if len(fns) == 1 and fns[0] in scopes:
            found += scopes[fns[0]].events(Kind.ZERO_GRAD, deep=True)
    return found


def _sibling_zeroing(model: FileModel, scope: Loop) -> list[Event]:
    """Zeroing in the functions defined beside a step function (the other methods of its class, the
    other nested functions of its enclosing function): called once per batch by a framework (an
    ignite ``Engine``, a trainer's ``__call__``), it is not the whole iteration, and its caller may
    zero through one of them (``self._reset_optimizers(engine)`` before ``self._update_optimizers``,
    an ``ITERATION_STARTED`` handler)."""
    fn = scope.function
    if fn is None:
        return []
    siblings: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [model.module]
    while stack and not siblings:
        node = stack.pop()
        body = getattr(node, "body", None)
        block = body.body if isinstance(body, cst.IndentedBlock) else body if isinstance(body, (list, tuple)) else ()
        if any(stmt is fn for stmt in block):
            siblings = [stmt for stmt in block if isinstance(stmt, cst.FunctionDef) and stmt is not fn]
            break
        stack.extend(stmt for stmt in block if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)))
    return [z for s in model.scopes if s.function is not None and s.function in siblings
            for z in s.events(Kind.ZERO_GRAD, deep=True)]


def _periodic_only(training: TrainingLoop, step: Event, clearing: list[Event]) -> Guard | None:
    """The test of the one accumulation-style condition (``(i + 1) % N == 0``) every zeroing of the
    optimizer runs under, where the step itself runs on every iteration after a backward on every
    iteration: the gradients of N steps are summed before they are cleared."""
    if not clearing or training.style is not Style.PLAIN or not training.guard(step).always:
        return None
    if not all(training.every_iteration(b) for b in training.backwards):
        return None
    guards: list[Guard] = []
    for zero in clearing:
        guard = training.guard(zero)
        if zero.loop is not training.loop or guard.kind is not GuardKind.PERIODIC or guard.partial \
                or guard.test is None:
            return None
        guards.append(guard)
    same = all(source(g.test) == source(guards[0].test) for g in guards)  # type: ignore[arg-type]
    return guards[0] if same else None


def _scheduler_present_only(step: Event, clearing: list[Event]) -> str | None:
    """The scheduler every zeroing of the optimizer runs only in the presence of, where the step does
    not (``optimizer.step()`` then ``if self.scheduler: self.scheduler.step(); self.zero_grad()``, the
    zeroing indented one level too deep): its name, or None."""
    names = set()
    for zero in clearing:
        extra = [c for c in zero.conds if c not in step.conds]
        found = [name for c in extra if (name := _scheduler_tested(c)) is not None]
        if not found:
            return None
        names.update(found)
    return names.pop() if len(names) == 1 else None


def _scheduler_tested(cond: Cond) -> str | None:
    """``if scheduler:`` / ``if self.scheduler is not None:`` (on its true side): the scheduler's name."""
    if cond.test is None or cond.negated:
        return None
    subject, present = flag_form(cond.test)
    name = dotted(subject) if present else None
    return name if name is not None and "sched" in last_part(name).lower() else None


def _path_to(node: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``node`` down to ``target`` (both included), not into nested functions."""
    if node is target:
        return [node]
    for child in children(node):
        if type(child) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):  # exact types: isinstance() on an ABC is slow
            continue
        path = _path_to(child, target)
        if path is not None:
            return [node, *path]
    return None


def _small_statements(suite: cst.BaseSuite) -> list[cst.CSTNode]:
    """A body's statements with each line of small statements split into them."""
    out: list[cst.CSTNode] = []
    for line in lines(suite):
        out.extend(line.body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite))  # type: ignore[arg-type]
                   else [line])
    return out


def _set_true(statement: cst.CSTNode) -> str | None:
    """``done = True``: the flag it sets."""
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
            and isinstance(statement.targets[0].target, cst.Name) \
            and isinstance(statement.value, cst.Name) and statement.value.value == "True":
        return statement.targets[0].target.value
    return None


def _leaves_after(loop: Loop, step: Event) -> bool:
    """The loop ends once ``step`` has run: a ``break`` (or ``return``) follows it in a body that holds
    it, or its own body sets a flag (``complete = True``) that a later ``if complete: break`` tests. The
    loop then steps at most once each time it runs: it gathers the micro-batches of one step (``while
    True: ... if count == N: optimizer.step(); complete = True ... if complete: break``), and what runs
    before it in its function runs before each step."""
    path = _path_to(loop.node.body, step.node)
    if path is None:
        return False
    flags: set[str] = set()
    for index in reversed([i for i, n in enumerate(path) if isinstance(n, (cst.IndentedBlock, cst.SimpleStatementSuite))]):
        statements = _small_statements(path[index])  # type: ignore[arg-type]
        holding = next((i for i, s in enumerate(statements) if s in path), None)
        if holding is None:
            return False
        if not flags:  # the body the step runs in
            flags = {f for s in statements if (f := _set_true(s)) is not None}
        for later in statements[holding + 1:]:
            if isinstance(later, (cst.Break, cst.Return)):
                return True
            if isinstance(later, cst.If) and isinstance(later.test, cst.Name) and later.test.value in flags \
                    and isinstance(exit_statement(later), cst.Break):
                return True
    return False


def _scaler_may_clear(model: FileModel, step: Event) -> bool:
    """A timm/MAE-style ``loss_scaler(loss, optimizer, ...)`` step whose helper this file cannot see
    into (a class of another module, passed in): it may clear the gradients it stepped on (a
    ``NativeScalerWithGradAccum`` that calls ``optimizer.zero_grad()`` after its step). Read where
    the file defines the helper's ``__call__``, and where it imports timm, whose scalers clear nothing."""
    if step.framework is not Framework.LOSS_SCALER:
        return False
    helpers = model.index.functions.get("__call__", [])
    if helpers:
        return any(isinstance(n, cst.Call) and last_part(func_name(n) or "") == "zero_grad"
                   for fn in helpers for n in walk(fn.body))
    return not any(isinstance(i, cst.ImportFrom) and i.module is not None
                   and source(i.module).split(".")[0] == "timm" for i in model.index.imports)


def _scaler_may_hold_back(model: FileModel, training: TrainingLoop, step: Event) -> bool:
    """A ``loss_scaler(loss, optimizer, ...)`` step the helper itself may skip: its ``__call__`` in
    this file steps under a test, or, where the file cannot see it, the loop hands the scaler its
    iteration counter (``loss_scaler.set_iters(ii)`` before the call: ViTs-vs-CNNs' AccumulativeScaler
    steps only when ``(iteration + 1) % forward_time == 0``), or tells it when to step (MAE's
    ``update_grad=`` of another module's ``NativeScalerWithGradNormCount``)."""
    held = keyword(step.node, "update_grad") if type(step.node) is cst.Call else None
    if held is not None and not (type(held) is cst.Name and held.value == "True"):  # type: ignore[attr-defined]
        return True  # MAE's `loss_scaler(loss, optimizer, update_grad=(i + 1) % accum_iter == 0)` steps when told
    if step.framework is not Framework.LOSS_SCALER or not step.scaler:
        return False
    helpers = model.index.functions.get("__call__", [])
    if helpers:
        return any(isinstance(n, cst.If) and any(isinstance(c, cst.Call) and last_part(func_name(c) or "") == "step"
                                                 for c in walk(n)) for fn in helpers for n in walk(fn.body))
    return told_the_iteration(training, step)


def _once_per_call(zero: Event, steps: list[Event], loops_of: dict[int, set[int]]) -> bool:
    """``zero`` runs once per call of the function it was inlined from (``train()`` zeroes, then runs
    its own epoch and batch loops, called per fold: ``for fold in range(5): train(...)``), while every
    step runs in a loop of that function inside ``zero``'s loop: it clears nothing between those steps,
    as a zeroing before a function's loops does not. Unless that function's loop steps once and ends
    (it gathers the micro-batches of one step)."""
    fn = zero.origin
    if fn is None or zero.site is None or zero.loop is None:
        return False
    own = loops_of.get(id(fn))
    if own is None:
        own = loops_of[id(fn)] = _loops_in(fn)
    return all(_in_own_loop(step, zero.loop, own) for step in steps)


def _once_per_pass(zero: Event, training: TrainingLoop, steps: list[Event]) -> bool:
    """``zero`` runs in a loop around the training loop, outside it, where the training loop steps on
    every iteration (no accumulation test) and runs on after its step: it clears once per pass, and
    the steps of a pass add up (htjb's ``optimizer.zero_grad()`` at the top of each epoch)."""
    loop = training.loop
    if training.style is not Style.PLAIN or not loop.is_loop or zero.loop is None or zero.loop is loop:
        return False
    outer = loop.parent
    while outer is not None and outer is not zero.loop:
        outer = outer.parent
    if outer is None or any(zero.order == e.order for e in loop.events(Kind.ZERO_GRAD, deep=True)):
        return False  # not around the loop, or the zeroing is the loop's own (a helper it calls)
    return all(s.loop is loop and training.guard(s).always and not _leaves_after(loop, s) for s in steps)


def _in_own_loop(step: Event, outer: Loop, own: set[int]) -> bool:
    loop = step.loop
    while loop is not None and loop is not outer:
        if id(loop.node) in own and not _leaves_after(loop, step):
            return True
        loop = loop.parent
    return False


def _loops_in(fn: cst.FunctionDef) -> set[int]:
    """The ``for``/``while`` statements of a function's own code (by ``id``), not of functions in it."""
    return {id(node) for node in walk(fn.body) if type(node) in (cst.For, cst.While)}


def _gradients_replaced(loop: Loop) -> bool:
    """The loop sets parameters' gradients by assignment in a loop over parameters (A3C's workers: ``for
    lp, gp in zip(local.parameters(), shared.parameters()): gp.grad = lp.grad.clone()``, then the shared
    optimizer's step): what that step uses is replaced each iteration, not added up (a value that reads
    the gradient it writes, ``p.grad = p.grad / N``, rescales what was added up)."""
    return any(
        type(node) is cst.For and any(type(n) is cst.Attribute and n.attr.value == "parameters"  # type: ignore[attr-defined]
                                      for n in walk(node.iter)) and any(  # type: ignore[attr-defined]
            type(inner) is cst.Assign and any(type(t.target) is cst.Attribute and t.target.attr.value == "grad"
                                              and not _reads(inner.value, dotted(t.target) or "") for t in inner.targets)
            for inner in walk(node.body))  # type: ignore[attr-defined]
        for node in walk(loop.node))


def _reads(value: cst.BaseExpression, name: str) -> bool:
    """``value`` reads ``name`` (``p.grad / N`` reads ``p.grad``: a rescaling, not a replacement)."""
    return any(n == name or n.startswith(name + ".") for n in names_in(value))


def _built_in(loop: Loop, optimizer: str | None) -> bool:
    return any(optimizer in a.names and isinstance(a.value, cst.Call) for a in loop.assignments)


class MissingZeroGrad(Rule):
    code = "LC103"
    message = "gradients are never cleared between optimizer steps"

    VALID = [
        """
for idx, (images, label_id) in enumerate(data_loader):
    total_loss = criterion(model(images), label_id) / config.TRAIN.ACCUMULATION_STEPS
    if config.TRAIN.ACCUMULATION_STEPS == 1:
        optimizer.zero_grad()
    total_loss.backward()
    if config.TRAIN.ACCUMULATION_STEPS > 1:
        if (idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0 or idx + 1 == len(data_loader):
            optimizer.step()
            optimizer.zero_grad()
    else:
        optimizer.step()
""",
        """
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
""",
        """
for x, y in loader:
    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss
    optimizer.step(closure)
""",
        """
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    for p in model.parameters():
        p.grad = None
""",
        """
for batch in loader:
    zero_grad(self.model_params)
    self.forward_backward(batch)
    self.opt.step()
""",
        """
for t in timesteps:
    x_in = latents.detach().clone().requires_grad_(True)
    opt = torch.optim.SGD([x_in], lr=0.1)
    guidance_loss(unet(x_in, t)).backward()
    opt.step()
""",
        """
def time_layer(x, target):
    layer = Attention(64)
    optimizer = torch.optim.Adam(layer.parameters(), 1e-4)
    start = time.time()
    for i in range(1000):
        out = layer(x)
        loss = ((target - out) ** 2).mean()
        loss.backward()
        optimizer.step()
    print("average time", (time.time() - start) / 1000)
""",
        """
# runs after every loss.backward() of the job
for event in events:
    kinds.append(backward_scaler(event, model.roles))  # named like a scaler, not timm's loss_scaler
""",
    ]
    INVALID = [
        """
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.grad = p.grad / n_workers
    optimizer.step()  # LC103
""",
        """
def fit(model, loader, optimizer, scheduler=None):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()  # LC103
        if scheduler:
            scheduler.step()
            optimizer.zero_grad()  # one level too deep: no scheduler, no zeroing
""",
        """
for step in range(num_train_steps):
    input_ids, labels = next(batches)
    loss = F.cross_entropy(model(input_ids), labels)
    loss.backward()
    optimizer.step()  # LC103
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.zero_grad()
""",
        """
def train_layer(x, target):
    layer = Attention(64)
    optimizer = torch.optim.Adam(layer.parameters(), 1e-4)
    for i in range(1000):
        out = layer(x)
        loss = ((target - out) ** 2).mean()
        loss.backward()
        optimizer.step()  # LC103
    return layer
""",
        """
optimizer.zero_grad()
for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()  # LC103
""",
        """
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
for real, _ in loader:
    fake = netG(torch.randn(real.size(0), nz, 1, 1))
    errD = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
    errD.backward()
    optimizerD.step()  # LC103
    netG.zero_grad()
    errG = criterion(netD(fake), ones)
    errG.backward()
    optimizerG.step()
""",
        """
optimizer_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
optimizer_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
optimizer_info = torch.optim.Adam(itertools.chain(gen.parameters(), disc.parameters(), [latent]), lr=2e-4)
for x, z in loader:
    optimizer_d.zero_grad()
    criterion(disc(x)[0], ones).backward()
    optimizer_d.step()
    optimizer_g.zero_grad()
    fake, code = disc(gen(z + latent))
    criterion(fake, ones).backward(retain_graph=True)
    optimizer_g.step()
    ((code - z) ** 2).mean().backward()
    optimizer_info.step()  # LC103
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        # once per loop, optimizer and function holding the step: the variants of a loop (an AMP and
        # an fp32 branch) step it at different calls, but it is one missing zeroing; step functions
        # of their own (`train_step_pytorch`, `train_step_ddp` chosen by the run's setting) each miss theirs
        reported: set[tuple[int, str | None, int]] = set()
        loops_of: dict[int, set[int]] = {}  # a function's own loops, by `id` of each (the tree lives meanwhile)
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.NO_STEP):
                continue
            if in_pytest_test(model, training.loop):
                continue  # a unit test's few steps check a property of the gradients; no model is trained
            steps = [s for s in training.steps if not s.closure and s.framework is not Framework.ENGINE]
            if not steps or len(steps) != len(training.steps):
                continue
            # a loop-less method the file calls once per iteration of a loop, on an object it builds
            per_batch = per_batch_calls(model.module, model.index, training.loop.function) \
                if not training.loop.is_loop and training.loop.function is not None \
                and training.loop.function not in model.index.process_functions else []
            if not training.loop.is_loop and training.loop.function not in model.index.process_functions \
                    and not per_batch:
                continue  # a step function called from elsewhere: its caller may zero (another module's)
            nest = list(_nest(training.loop))
            if any(loop.opaque_calls for loop in nest):
                continue
            zeros = [z for loop in nest for z in loop.events(Kind.ZERO_GRAD, deep=True)
                     if not _once_per_call(z, steps, loops_of)]
            # `for epoch ...: optimizer.zero_grad(); for batch in loader: ... optimizer.step()`: once per
            # pass of the loop around, not between the steps
            per_pass = [z for z in zeros if _once_per_pass(z, training, steps)]
            zeros = [z for z in zeros if z not in per_pass]
            scope = training.loop.parent
            if training.loop.is_loop and scope is not None and not scope.is_loop \
                    and all(_leaves_after(training.loop, s) for s in steps):
                # a loop that steps once and ends: the zeroing before it in its function runs per step
                zeros += [z for z in scope.events(Kind.ZERO_GRAD) if z.order < training.loop.order]
            if not training.step_loop.is_loop:
                # the steps follow a micro-step loop in a function body run once per step (a
                # `train_step` a loop elsewhere calls): a zeroing in that body runs between steps
                zeros += training.step_loop.events(Kind.ZERO_GRAD)
                zeros += _helper_zeroing(model, training.step_loop)
                zeros += _sibling_zeroing(model, training.step_loop)
            # steps in a method of their own (an `update()` beside the method that back-propagates):
            # a zeroing there runs between steps
            zeros += [z for s in steps if s.loop is not None and s.loop not in nest and not s.loop.is_loop
                      for z in s.loop.events(Kind.ZERO_GRAD, deep=True)]
            zeroing = Zeroing(model, {s.optimizer for s in steps if s.optimizer})
            for step in steps:
                key = (id(training.loop.node), step.optimizer, id(step.origin))
                clearing = [z for z in zeros if zeroing.clears(z, step) is not False]
                if key in reported:
                    continue
                periodic = _periodic_only(training, step, clearing)
                if periodic is not None and _scaler_may_hold_back(model, training, step):
                    continue  # the helper may step only where the loop zeroes
                if periodic is not None:
                    reported.add(key)
                    test = source(periodic.test)  # type: ignore[arg-type]
                    yield self.at(step, f"`{step.receiver}` steps on every iteration but its gradients are cleared "
                                        f"only under `{test}`: the steps in between add up the gradients of "
                                        "micro-batches already stepped on; step under the same condition as the "
                                        "zeroing" + setting_note(model, periodic.modulus))
                    continue
                present = _scheduler_present_only(step, clearing)
                if present is not None:
                    reported.add(key)
                    yield self.at(step, f"`{step.receiver}` steps but its gradients are cleared only when "
                                        f"`{present}` is set (the zeroing sits under `if {present}:`): a run "
                                        "without one adds up the gradients of every micro-batch stepped on")
                    continue
                if clearing or _scaler_may_clear(model, step):
                    continue  # some zeroing may clear this optimizer's gradients
                if step.optimizer and zeroing.covered(step.optimizer, zeros):
                    continue  # built over modules each zeroed every iteration through their own optimizers
                per_step = nest[:nest.index(training.step_loop) + 1] if training.step_loop in nest else nest[:1]
                if any(_built_in(loop, step.optimizer) for loop in per_step):
                    # a fresh optimizer per step, often over fresh tensors: nothing to carry (one built
                    # per fold of a loop around a whole training run steps many times before the next)
                    continue
                if result_discarded(training, step.optimizer):
                    continue  # a timing loop training a throw-away module: nobody sees how it trains
                if _gradients_replaced(training.step_loop):
                    continue  # the gradients are written, not added to, before the step
                if _holder_runs_unseen_method(model, training.step_loop, step):
                    continue  # `trainer.train_step(batch)` may clear the `trainer.optimizer` it holds
                reported.add(key)
                if any(zeroing.clears(z, step) is not False for z in per_pass):
                    yield self.at(step, f"`{step.receiver}` steps on every iteration but its gradients are cleared "
                                        "only once per pass of the loop around this one, before or after it: each "
                                        "step of a pass adds up the gradients of all the earlier ones; clear them "
                                        "after every step")
                    continue
                others = " (the loop zeroes only other optimizers' gradients)" if zeros else ""
                elsewhere = model.project.where(step.node) if model.project is not None else None
                through = f" (in `{call_text(step.node)}`, {elsewhere})" if elsewhere else ""
                span = f"between the calls of `{source(per_batch[0].func)}()`, one per iteration of a loop" \
                    if per_batch else "in this loop"
                if per_batch and others:
                    others = " (it zeroes only other optimizers' gradients)"
                yield self.at(step, f"`{step.receiver}` steps{through} but its gradients are never cleared {span}"
                                    f"{others}: each step adds up the gradients of all previous ones")
