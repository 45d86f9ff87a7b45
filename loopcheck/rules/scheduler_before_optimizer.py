"""## What it does
Checks for an LR scheduler stepped before the optimizer in an iteration, in the batch loop or at
the start of the epoch loop (on every epoch, or in the branch that runs the batch loop: the `else:`
of a warmup phase that trains another optimizer, or the tutorial's `if phase == "train":` of a
`for phase in ["train", "val"]:` pass whose optimizer steps under the same test).

A Lightning Fabric loop (`fabric.backward(loss)`) steps its optimizer and scheduler in its own
code and is read as written.

A scheduler step under a test of the scheduler alone (`if lr_scheduler is not None:`,
`not isinstance(lr_scheduler, ReduceLROnPlateau)`) counts as stepped wherever the optimizer steps:
such a test holds on every iteration or on none. None is where the file binds the scheduler only to
`None` (directly or through a function of the file that returns it) and builds no scheduler at all:
the step never runs (an optimizer such as `BertAdam(..., t_total=...)` schedules itself). A step
under an option (`if args.cosine: scheduler.step()`) is reported with it: "(only when `args.cosine` holds)".

Only a schedule counted in epochs is checked in the loop that steps the optimizer: that loop goes
over epochs (`for epoch in range(epochs):`, training on the whole data each time). Stepped once per
batch (in the batch loop, in the step branch of an accumulation window, or in a function called per
batch), the order shifts a schedule of thousands of values by one, which no run notices; PyTorch
still warns once, and `loopcheck run` reports the learning rate the first step actually used.

## Why is this bad?
Since PyTorch 1.1 `scheduler.step()` must follow `optimizer.step()`. Stepping it first skips the
first value of the schedule: the initial learning rate is never used, a warmup starts one epoch
late, a step decay comes one epoch early. With a schedule of a few dozen epochs, that is a few
percent of the run on the wrong learning rate. PyTorch warns once, which is easy to miss in logs.
A schedule that warms up from zero (`get_linear_schedule_with_warmup(optimizer, 8, total)` and the
other `transformers` `get_*_with_warmup` schedules, with a warmup that is not a literal 0;
pytorch-gradual-warmup-lr's `GradualWarmupScheduler(optimizer, multiplier=1, total_epoch=5)`, whose
README steps it once before the loop, also with a multiplier option whose default is 1
(`multiplier=args.lr_multiplier`); pl_bolts' `LinearWarmupCosineAnnealingLR` with its default
`warmup_start_lr=0.0`) is not flagged: the value stepping first skips is a learning rate of 0, and
skipping it loses no update (stepped once per epoch, it saves a whole epoch at learning rate 0).
Before 1.1 the scheduler was stepped first, so a project that pins `torch` below 1.1 (in its
requirements, setup.py, pyproject.toml or environment.yml, or, where none names torch, in the install
commands and requirements of its README, INSTALL or install scripts, as LC206 reads them) is not flagged, nor
is a script that names an argument `async=` (torch < 0.4's `non_blocking=`, see LC000). Neither is a schedule
class of the project that derives from nothing (`class WarmupLinearLRSchedule:` with its own
`step()`): it is not torch's scheduler, and its `step()` may set the value of the period it starts.
Nor is a scheduler built over a trained module rather than an optimizer (pointnet2's
`BNMomentumScheduler(net, bn_lambda=...)`, copied by VoteNet and many point-cloud repositories): it
schedules BatchNorm momentum, sets its first value when built, and no learning rate is skipped.
Nor is one stepped at the top of the epoch only from a later epoch on (`else:` of `if epoch <= warm_up:`,
which sets the learning rate by hand): the optimizer has stepped through the first epochs before it.
Nor is a scheduler whose count the file sets one back (ultralytics' `self.scheduler.last_epoch =
self.start_epoch - 1`, then `self.scheduler.step()` at the top of every epoch): that step moves it to
the epoch about to train and applies that epoch's value (run on CPU: a LambdaLR gives epochs 0, 1, 2
their values 1, 1/2, 1/3).

With several optimizers, a scheduler is compared with the optimizer it was built on
(`LambdaLR(opt_g, ...)` follows `opt_g.step()`, whatever other optimizers step later); one the file
does not build (a trainer's parameter), stepped at the top of the epoch loop, precedes them all; where the
batch loop is a function of the same file (`def train(model, loader, optimizer)` called as
`train(model, loader, opt_joint)`), its optimizer is the one the call passes.

A `scheduler.step()` left once before the epoch loop, before any optimizer step (a torch < 1.1 habit),
where the epoch loop steps it again after its batches, is flagged too (run on CPU: a MultiStepLR with
milestone 2 gives 0.1, 0.01, 0.01 instead of 0.1, 0.1, 0.01); one under a case of its own (`if
args.LRScheduler == 'cosine':`) or after a warm-up pass that stepped the optimizer is not.

## Fix
Call `scheduler.step()` after `optimizer.step()` (and drop one before the training loop).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_after, own_line
from loopcheck.model import Event, FileModel, Framework, Kind, Loop, Style
from loopcheck.model.guards import GuardReader, exclusive
from loopcheck.model.memory import module_name, trained_modules
from loopcheck.model.roles import Role, role_of_constructor
from loopcheck.model.values import numeric
from loopcheck.model.syntax import (dotted, func_name, int_value, is_none, is_zero, keyword, last_part, names_in, own_call_name,
                                    positional, same, source, walk)
from loopcheck.model.training import is_data_loop
from loopcheck.project.index import class_bases
from loopcheck.rules._base import Rule, Violation


class SchedulerBeforeOptimizer(Rule):
    code = "LC302"
    message = "the LR scheduler steps before the optimizer"
    fixable = True

    VALID = [
        """
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
""",
        """
for epoch in range(epochs):
    lr_scheduler.step(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
sched_g = torch.optim.lr_scheduler.LambdaLR(opt_g, lambda it: min(1.0, (it + 1) / 1000))
for real in loader:
    opt_g.zero_grad()
    g_loss(real).backward()
    opt_g.step()
    sched_g.step()
    for _ in range(disc_updates):
        opt_d.zero_grad()
        d_loss(real).backward()
        opt_d.step()
""",
        """
lr_scheduler = get_cosine_schedule_with_warmup(optimizer, 8, 3000)
for epoch in range(epochs):
    lr_scheduler.step()
    for x, y in loader:
        criterion(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
""",
        """
def prep_optimizer(model, total_steps):
    scheduler = None
    optimizer = BertAdam(model.parameters(), lr=1e-4, warmup=0.1, t_total=total_steps)
    return optimizer, scheduler

def train_epoch(model, loader, optimizer, scheduler):
    for x, y in loader:
        criterion(model(x), y).backward()
        if scheduler is not None:
            scheduler.step()
        optimizer.step()
        optimizer.zero_grad()

optimizer, scheduler = prep_optimizer(model, total_steps)
for epoch in range(epochs):
    train_epoch(model, loader, optimizer, scheduler)
""",
        """
warm_up = 10
scheduler = CosineAnnealingLR(optimizer=optimizer, T_max=n_epochs - warm_up)
for epoch in range(1, n_epochs + 1):
    model.train()
    if warm_up > 0 and epoch <= warm_up:
        lr = max_lr * epoch / warm_up
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
    else:
        scheduler.step()
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda e: (1 - e / epochs) * 0.9 + 0.1)
scheduler.last_epoch = start_epoch - 1
for epoch in range(start_epoch, epochs):
    scheduler.step()
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs * len(loader))
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        scheduler.step()
        optimizer.step()
""",
    ]
    INVALID = [
        """
sched_g = torch.optim.lr_scheduler.StepLR(opt_g, step_size=30)
for epoch in range(epochs):
    opt_d.zero_grad()
    d_loss(graph).backward()
    opt_d.step()
    sched_g.step()  # LC302
    opt_g.zero_grad()
    g_loss(graph).backward()
    opt_g.step()
""",
        """
for epoch in range(epochs):
    optimizer.zero_grad()
    criterion(model(features), labels).backward()
    scheduler.step()  # LC302
    optimizer.step()
""",
        """
for epoch in range(epochs):
    scheduler.step()  # LC302
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if model.project is not None and model.project.pins.below("torch", "1.1"):
            return  # the order torch < 1.1 documented (its schedulers counted from the first step() call)
        for training in model.training_loops:
            steps = [s for s in training.steps if s.framework in (Framework.TORCH, Framework.LOSS_SCALER)]
            if training.style in (Style.FRAMEWORK, Style.NO_STEP) or not steps:
                continue
            loop = training.step_loop
            for scheduler in loop.events(Kind.SCHEDULER_STEP):
                first = _first_step(model, scheduler, steps)
                if first is None or scheduler.has_args or scheduler.order > first.order or exclusive(
                        scheduler.conds, first.conds):
                    continue
                if scheduler.conds != first.conds[: len(scheduler.conds)]:
                    if not _checks_itself(scheduler, first) or _always_none(model, scheduler.receiver):
                        continue
                if training.accumulates and len(scheduler.conds) < len(first.conds):
                    continue  # stepped on every micro-batch, the optimizer only on some: LC301's finding
                if _stepped_first_by_design(model, scheduler.receiver):
                    continue
                if not _counts_epochs(loop):
                    continue  # a schedule of batches: the order shifts it by one of its many values
                yield self._report(model, scheduler, first.stmt, "epoch")
            outer = loop.parent
            if outer is None or not outer.is_loop or is_data_loop(outer) or outer.events(Kind.STEP):
                continue  # `for _ in range(disc_updates)` inside the batch loop is not the batch loop
            reader = GuardReader(outer, model.index.int_inits)
            for scheduler in outer.events(Kind.SCHEDULER_STEP):
                # before the batch loop it precedes every optimizer's step: which one it was built on
                # matters only where the file says, and that one does not step here
                owners = model.roles.scheduler_optimizers(scheduler.receiver)
                if _first_step(model, scheduler, steps) is None and owners:
                    continue
                if any(s.order < scheduler.order and (not owners or last_part(s.optimizer or "") in owners
                                                      or last_part(_passed_as(s) or "") in owners)
                       for s in outer.events(Kind.STEP, deep=True)):
                    continue  # an earlier pass of the epoch steps its optimizer (or one it may be built on) first
                # stepped on every epoch, or in the branch that runs the batch loop (`else:` of a warmup
                # phase that trains another optimizer): each time before that loop's first step
                if _stepped_first_by_design(model, scheduler.receiver):
                    continue
                if _after_early_epochs(model, outer, loop, scheduler):
                    continue
                if not scheduler.has_args and scheduler.order < loop.order and (reader.guard(
                        scheduler.conds, scheduler.order).always or scheduler.conds and scheduler.conds == loop.conds
                        or _same_phase(scheduler, steps)):
                    yield self._report(model, scheduler, loop.node, "epoch")
        yield from self._before_training(model)

    def _before_training(self, model: FileModel) -> Iterator[Violation]:
        """``scheduler.step()`` once before the epoch loop, no optimizer having stepped yet, where the
        epoch loop steps it again per epoch: the first epoch already trains at the second value."""
        for scope in model.scopes:
            for scheduler in scope.events(Kind.SCHEDULER_STEP):
                if scheduler.has_args or any(e.order < scheduler.order for e in scope.events(Kind.STEP)) \
                        or _in_a_loop(model, scheduler.stmt):
                    continue  # (`for epoch in range(start_epoch): scheduler.step()` fast-forwards a resumed run)
                training = next((loop for loop in scope.loops if loop.order > scheduler.order), None)
                # (in the branch that runs the loop: after `if args.evaluate: return`, not under a case of its own)
                if training is None or scheduler.conds != training.conds[:len(scheduler.conds)] or not any(
                        s.framework in (Framework.TORCH, Framework.LOSS_SCALER) for s in training.events(Kind.STEP, deep=True)):
                    continue
                # stepped again in the epoch loop itself, after its batches: a schedule of epochs
                if not any(s.receiver == scheduler.receiver and not s.has_args for s in training.events(Kind.SCHEDULER_STEP)) \
                        or _stepped_first_by_design(model, scheduler.receiver):
                    continue
                yield self._report(model, scheduler, training.node, "epoch", before_loop=True)

    def _report(self, model: FileModel, scheduler: Event, after: cst.CSTNode, unit: str,
                before_loop: bool = False) -> Violation:
        """``after``: the statement the scheduler step belongs behind (the step, or the batch loop);
        ``unit``: what each scheduler step counts there; ``before_loop``: a step before the training
        loop, which only goes (no fix: the loop steps it again)."""
        movable = not before_loop and own_line(scheduler) and model.owner(scheduler.stmt) is model.owner(after) is not None
        fix = move_after(scheduler.stmt, after, "move the scheduler step after the optimizer step") \
            if movable else None  # type: ignore[arg-type]
        kinds = {last_part(func_name(call) or "") for call in model.roles.constructors(scheduler.receiver, Role.SCHEDULER)}
        effect = f"every decay comes one {unit} early" if kinds and kinds <= _DECAYS else \
            "the first value of the schedule is skipped"
        where = "before the training loop, before any `optimizer.step()`" if before_loop else "before `optimizer.step()`"
        gate = "" if before_loop else _option_gate(scheduler)  # (before the loop: the loop's own conditions)
        return self.at(scheduler, f"`{scheduler.receiver}.step()` runs {where}: {effect}{gate}", fix)


def _after_early_epochs(model: FileModel, epochs: Loop, batches: Loop, scheduler: Event) -> bool:
    """The scheduler steps only once the epoch count has passed a bound (``if epoch > warm_up:``, or the
    ``else:`` of ``if warm_up > 0 and epoch <= warm_up:`` that sets the learning rate by hand, with
    ``warm_up = 10``), under a test the batch loop does not run under: the first epochs train through
    that loop without it, so its first step follows their optimizer steps and skips nothing. Not a step
    that runs in the first epochs (``if epoch < warmup_epochs: warmup_scheduler.step()``), nor where the
    batch loop runs under the same test (a warm-up phase that trains another optimizer in its own loop)."""
    node = epochs.node
    if type(node) is not cst.For or type(node.iter) is not cst.Call or func_name(node.iter) != "range":
        return False  # (`for phase in ["train", "val"]:` counts no epochs)
    counters = set(names_in(node.target))
    for cond in scheduler.conds:
        if cond.test is None or cond in batches.conds:
            continue
        parts = [cond.test]
        if cond.negated and type(cond.test) is cst.BooleanOperation and type(cond.test.operator) is cst.And:
            parts = [cond.test.left, cond.test.right]  # `not (a and b)`: later where b is, if a surely holds
        later = [p for p in parts if _later_epochs(p, counters, cond.negated)]
        if later and all(p in later or _positive_literal(model, p) for p in parts):
            return True
    return False


def _later_epochs(test: cst.BaseExpression, counters: set[str], negated: bool) -> bool:
    """``epoch > bound`` (or ``epoch <= bound`` negated): holds only once the count passed the bound."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    operator, right = type(test.comparisons[0].operator), test.comparisons[0].comparator
    if counters & set(names_in(right)) and not counters & set(names_in(test.left)):
        operator = _MIRRORED.get(operator, operator)  # `warm_up < epoch`
    elif not counters & set(names_in(test.left)):
        return False
    return operator in ((cst.LessThan, cst.LessThanEqual) if negated else (cst.GreaterThan, cst.GreaterThanEqual))


def _positive_literal(model: FileModel, test: cst.BaseExpression) -> bool:
    """``warm_up > 0`` with ``warm_up`` bound only to positive integer literals in the file."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 \
            or type(test.comparisons[0].operator) is not cst.GreaterThan or not is_zero(test.comparisons[0].comparator):
        return False
    name = dotted(test.left)
    values = model.index.int_inits.get(last_part(name)) if name is not None else None
    return bool(values) and all(v is not None and v > 0 for v in values)


_MIRRORED = {cst.LessThan: cst.GreaterThan, cst.LessThanEqual: cst.GreaterThanEqual,
             cst.GreaterThan: cst.LessThan, cst.GreaterThanEqual: cst.LessThanEqual}


def _in_a_loop(model: FileModel, stmt: cst.CSTNode) -> bool:
    """``stmt`` runs in a loop of its function (a loop that steps nothing is no loop of the model)."""
    owner = model.owner(stmt)
    while owner is not None and type(owner) is not cst.FunctionDef:
        if type(owner) in (cst.For, cst.While):
            return True
        owner = model.owner(owner)
    return False


def _option_gate(scheduler: Event) -> str:
    """`` (only when `args.cosine` holds)``: the options (a name or an attribute, such as a flag
    that picks the schedule) the scheduler step runs under, where a run may leave them off."""
    gates = [f"`{dotted(c.test)}` " + ("does not hold" if c.negated else "holds") for c in scheduler.conds
             if c.test is not None and isinstance(c.test, (cst.Name, cst.Attribute)) and dotted(c.test)
             and last_part(dotted(c.test) or "") != last_part(scheduler.receiver or "")]
    return f" (only when {' and '.join(gates)})" if gates else ""


# Step decays: stepped first, the k-th decay arrives after k * step_size - 1 periods instead of k * step_size.
_DECAYS = {"StepLR", "MultiStepLR"}


def _stepped_first_by_design(model: FileModel, receiver: str | None) -> bool:
    """A scheduler whose step before the optimizer's skips nothing that matters: a class of its own,
    a warmup from zero, or one built over a module rather than an optimizer."""
    return _plain_class(model, receiver) or _warms_up_from_zero(model, receiver) or _over_a_module(model, receiver) \
        or _rebased(model, receiver)


def _rebased(model: FileModel, receiver: str | None) -> bool:
    """The file sets the scheduler's count one back (ultralytics' ``self.scheduler.last_epoch =
    self.start_epoch - 1``, then a step at the top of every epoch): the step before the optimizer's
    moves it to the epoch about to train, whose value it then applies; nothing is skipped."""
    if receiver is None or "last_epoch" not in model.source:
        return False
    short = last_part(receiver)
    return any(
        type(node) is cst.Assign and len(node.targets) == 1 and isinstance(target := node.targets[0].target, cst.Attribute)
        and target.attr.value == "last_epoch" and (name := dotted(target.value)) is not None and last_part(name) == short
        and (int_value(node.value) == -1 or isinstance(node.value, cst.BinaryOperation)
             and isinstance(node.value.operator, cst.Subtract) and int_value(node.value.right) == 1)
        for node in walk(model.module, into_functions=True))


def _over_a_module(model: FileModel, receiver: str | None) -> bool:
    """Every construction hands the scheduler a trained module first (pointnet2's
    ``BNMomentumScheduler(net, bn_lambda=...)``, copied by VoteNet and many point-cloud repositories):
    it schedules BatchNorm momentum, no optimizer's learning rate, and sets its first value when built."""
    calls = model.roles.constructors(receiver, Role.SCHEDULER)
    trained = trained_modules(model)
    return bool(calls) and all(
        (first := positional(call)) and (name := dotted(first[0])) is not None and module_name(name) in trained
        for call in calls)


def _plain_class(model: FileModel, receiver: str | None) -> bool:
    """The scheduler is built by a class of the project that derives from nothing (``class
    WarmupLinearLRSchedule:`` with its own ``step()``): torch's schedulers apply their first value when
    built, and a step before the optimizer's skips it; such a class's ``step()`` may as well set the
    value of the period it starts (its constructor setting none), and stepping it first is its use."""
    calls = model.roles.constructors(receiver, Role.SCHEDULER)
    for call in calls:
        name = func_name(call) or ""
        bases = class_bases(model.source, name) if "." not in name else None
        if bases is None and model.project is not None:
            bases = model.project.class_bases(name)
        if bases not in ("", "object"):
            return False
    return bool(calls)


_WARMUP_FROM_ZERO = {"get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                     "get_cosine_with_hard_restarts_schedule_with_warmup", "get_constant_schedule_with_warmup",
                     "get_polynomial_decay_schedule_with_warmup", "get_inverse_sqrt_schedule"}


def _warms_up_from_zero(model: FileModel, receiver: str | None) -> bool:
    """Every construction of the scheduler is a ``transformers`` warmup schedule whose warmup length
    (second argument or ``num_warmup_steps``) is not a literal 0, or pytorch-gradual-warmup-lr's
    ``GradualWarmupScheduler(optimizer, multiplier=1, total_epoch=...)``, or pl_bolts'
    ``LinearWarmupCosineAnnealingLR`` from its default ``warmup_start_lr=0.0``: its first value is a learning
    rate of 0 (``step / warmup`` at step 0), so stepping it before the optimizer skips only that."""
    calls = model.roles.constructors(receiver, Role.SCHEDULER)
    for call in calls:
        args = positional(call)
        if last_part(func_name(call) or "") == "GradualWarmupScheduler":
            # pytorch-gradual-warmup-lr's: at `multiplier=1` it ramps `base_lr * epoch / total_epoch` from 0
            multiplier = keyword(call, "multiplier") or (args[1] if len(args) > 1 else None)
            if multiplier is None or _number(model, multiplier) != 1 or is_zero(
                    keyword(call, "total_epoch") or (args[2] if len(args) > 2 else cst.Integer("0"))):
                return False
            continue
        if last_part(func_name(call) or "") == "LinearWarmupCosineAnnealingLR":
            # pl_bolts' (copied into many repositories): from `warmup_start_lr`, 0.0 unless given
            start = keyword(call, "warmup_start_lr") or (args[3] if len(args) > 3 else None)
            if start is not None and not is_zero(start):
                return False
            continue
        if last_part(func_name(call) or "") not in _WARMUP_FROM_ZERO:
            return False
        warmup = keyword(call, "num_warmup_steps")
        if warmup is None and len(args) > 1:
            warmup = args[1]
        if warmup is None or int_value(warmup) == 0:
            return False
    return bool(calls)


def _number(model: FileModel, expr: cst.BaseExpression) -> float | None:
    """The number ``expr`` is by the file's literals and assignments, or, for an option
    (``args.lr_multiplier``), the default the project's one declaration of it gives."""
    value = numeric(expr, model.index)
    name = dotted(expr)
    if value is None and name is not None and "." in name and model.project is not None:
        value = model.project.option_default(last_part(name))
    return value


def _same_phase(scheduler: Event, steps: list[Event]) -> bool:
    """The scheduler steps under the very tests the optimizer steps under in the batch loop below it
    (``for phase in ["train", "val"]:`` with ``if phase == "train": scheduler.step()`` before the loop
    and ``if phase == "train": optimizer.step()`` in it): it runs in the pass that trains, before it."""
    tests = [c for c in scheduler.conds if c.test is not None]
    return bool(tests) and len(tests) == len(scheduler.conds) and all(
        all(any(same(c.test, d.test) and c.negated == d.negated for d in step.conds) for c in tests) for step in steps)


def _counts_epochs(loop: Loop) -> bool:
    """The loop whose iterations step the optimizer counts epochs (``for epoch in range(epochs):`` training
    on the whole data each time): not a loop over a loader or over batches, nor a function's calls."""
    if not loop.is_loop or is_data_loop(loop):
        return False
    node = loop.node
    parts = [node.target, node.iter] if isinstance(node, cst.For) else [node.test]
    return any("epoch" in name.lower() for part in parts for name in names_in(part))


def _checks_itself(scheduler: Event, first: Event) -> bool:
    """The scheduler steps under the optimizer step's conditions plus tests of the scheduler object
    alone (``if lr_scheduler is not None and not isinstance(lr_scheduler, ReduceLROnPlateau):``): they
    hold on every iteration or on none, so where it steps it steps before the optimizer each time."""
    shared = len(first.conds)
    return scheduler.conds[:shared] == first.conds and all(
        c.test is not None and _about(c.test, scheduler.receiver) for c in scheduler.conds[shared:])


def _always_none(model: FileModel, receiver: str | None) -> bool:
    """The file binds the scheduler's name only to ``None`` (``scheduler = None``, also through a
    function of the file that returns it: ``optimizer, scheduler, model = prep_optimizer(...)`` with
    ``scheduler = None; return optimizer, scheduler, model``) and builds no scheduler anywhere: its
    ``if scheduler is not None: scheduler.step()`` never runs (an optimizer that schedules itself,
    such as ``BertAdam(..., t_total=...)``)."""
    roles = model.roles
    short = last_part(receiver or "")
    values, unpacked = roles.values.get(short, []), roles.unpacked.get(short, [])
    if not short or roles.constructed.get(short) or not (values or unpacked) or not all(is_none(v) for v in values):
        return False
    for call, position in unpacked:
        own = own_call_name(call)
        if own is None or own not in roles.functions:
            return False
        for fn in roles.functions[own]:
            for value in roles.returns.get(fn, ()):
                if value is None or is_none(value):
                    continue
                elements = value.elements if type(value) is cst.Tuple else ()  # type: ignore[attr-defined]
                if len(elements) <= position or any(type(e) is cst.StarredElement for e in elements):
                    return False
                element = elements[position].value
                if not is_none(element) and last_part(dotted(element) or "") != short:
                    return False
    return not any(_builds_scheduler(func_name(call) or "") for call in model.index.calls)


def _builds_scheduler(name: str) -> bool:
    """A scheduler class (``LambdaLR``) or factory (``get_linear_schedule_with_warmup``), not a method
    that reads one (``optimizer.get_lr()``)."""
    short = last_part(name)
    return role_of_constructor(name) is Role.SCHEDULER and (short[:1].isupper() or "schedul" in short.lower())


def _about(test: cst.BaseExpression, receiver: str | None) -> bool:
    """``test`` looks at ``receiver`` only: itself, ``is (not) None``, ``isinstance`` / ``hasattr`` of it,
    joined by ``and`` / ``or`` / ``not``."""
    if receiver is None:
        return False
    if isinstance(test, cst.BooleanOperation):
        return _about(test.left, receiver) and _about(test.right, receiver)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _about(test.expression, receiver)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return isinstance(target.operator, (cst.Is, cst.IsNot)) and dotted(test.left) == receiver \
            and isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
    if isinstance(test, cst.Call) and func_name(test) in ("isinstance", "hasattr") and test.args:
        return dotted(test.args[0].value) == receiver
    return dotted(test) == receiver


def _first_step(model: FileModel, scheduler: Event, steps: list[Event]) -> Event | None:
    """The first step of the optimizer ``scheduler`` was built on; None when that optimizer does not
    step here, or when several do and the file does not say which one the scheduler follows."""
    owners = model.roles.scheduler_optimizers(scheduler.receiver)
    if owners:
        steps = [s for s in steps if s.optimizer and (last_part(s.optimizer) in owners
                                                      or last_part(_passed_as(s) or "") in owners)]
    elif len({last_part(s.optimizer or "") for s in steps}) > 1:
        return None
    return min(steps, key=lambda s: s.order) if steps else None


def _passed_as(step: Event) -> str | None:
    """The optimizer a step's name stands for where the nest last binds that name to another before
    the step (``def train(model, loader, optimizer)`` inlined for ``train(model, loader, opt_g)``: its
    parameter is bound at the call site, after any other call's binding), None where it is bound
    otherwise or not at all."""
    name, conds, loop = step.optimizer, step.conds, step.loop
    while loop is not None:
        # a binding in another branch (`if warm: train(optimizer=warm_opt) else: ...`) never reaches the
        # step; `conds`: where the step, or the loop holding it, sits in this loop
        bound = [a for a in loop.assignments if a.names == (name,) and a.order < step.order
                 and not exclusive(a.conds, conds)]
        if bound:
            last = max(bound, key=lambda a: a.order)
            return dotted(last.value) if last.op == "=" else None
        conds, loop = loop.conds, loop.parent
    return None
