"""## What it does
Checks for a GradScaler whose `scaler.step(optimizer)` (or `scaler.unscale_(optimizer)`) is not
followed by `scaler.update()` on every path: a skip branch such as
`if not torch.isfinite(loss): continue` between them (also `if math.isfinite(norm): scaler.step(opt);
scaler.update() else: return False` in a step function after `unscale_()`), an `update()` under a
condition the step does not have (`if norm <= max_norm: scaler.step(opt); scaler.update()` after
`unscale_()`, also through a flag set from the norm), or no `update()` at all. A base class's loop that calls
`self.train_one_step(batch)` runs the override of the one subclass of the file where the base's
method only raises `NotImplementedError`. Also checks for `update()` on every micro-batch while the
step runs only at the accumulation boundary.

## Why is this bad?
`update()` is what resets the scaler's per-optimizer state and adapts the loss scale. After a
`step()` or `unscale_()` that is not followed by `update()`, the next `step()` raises
"step() has already been called since the last update()" (the next `unscale_()` raises likewise),
typically hours into a run, on the first non-finite loss that takes the skip branch. Without any
`update()` the scale never grows back or shrinks after overflows. An `update()` on a micro-batch
that did not step has no inf checks to read and fails.

## Fix
Call `scaler.update()` right after `scaler.step(optimizer)`, under the same condition, and put
skip branches before `unscale_()`/`step()` (or call `update()` in them too).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import insert_after, move_to_step, own_line
from loopcheck.model import Cond, Event, FileModel, GuardKind, Kind, Style, TrainingLoop
from loopcheck.model.amp import custom_scaler, extra_conds, is_skip_branch, same_scaler, scaler_steps
from loopcheck.model.events import CLIP_FUNCTIONS
from loopcheck.model.guards import exclusive
from loopcheck.model.syntax import dotted, last_part, method, names_in, own_call_name, source, walk
from loopcheck.rules._base import Rule, Violation


class ScalerStepWithoutUpdate(Rule):
    code = "LC202"
    fixable = True
    message = "`scaler.step()` is not followed by `scaler.update()` on every path"

    VALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    if not torch.isfinite(loss):
        continue
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
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
def fit(model, loader, optimizer, scaler, max_steps):
    for step, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        if step + 1 >= max_steps:
            return
        scaler.update()
        optimizer.zero_grad()
""",
        """
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(grad_norm):
        scaler.update()
        optimizer.zero_grad()
        continue
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
""",
        """
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if grad_norm <= max_norm:
        scaler.step(optimizer)
        scaler.update()
    else:
        scaler.update()
    optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # LC202
    if not torch.isfinite(loss):
        print("non-finite loss, skipping")
        continue
    scaler.update()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # LC202
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(grad_norm):
        continue
    scaler.step(optimizer)
    scaler.update()
""",
        """
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum
    scaler.scale(loss).backward()
    if (i + 1) % accum == 0:
        scaler.step(optimizer)
        optimizer.zero_grad()
    scaler.update()  # LC202
""",
        """
def train_step(model, batch, optimizer, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # LC202
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(grad_norm):
        optimizer.zero_grad()
        return None
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return loss.item()


for batch in loader:
    train_step(model, batch, optimizer, scaler)
""",
        """
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # LC202
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    skip = False
    if grad_norm > max_norm:
        skip = True
    if not skip:
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.ACCELERATE, Style.NO_STEP):
                continue
            loop = training.step_loop
            updates = loop.events(Kind.SCALER_UPDATE)
            calls = scaler_steps(loop.events(Kind.STEP)) + loop.events(Kind.SCALER_UNSCALE)
            for call in calls:
                if custom_scaler(model.roles, call.scaler if call.kind is Kind.STEP else call.receiver):
                    continue
                message = self._missing_update(model, training, call, updates)
                if message:
                    never = call.kind is Kind.STEP and not any(same_scaler(u.receiver, call.scaler) for u in updates)
                    fix = insert_after(call.stmt, f"{call.scaler}.update()", f"call `{call.scaler}.update()` after "
                                       "the step") if never and own_line(call) else None
                    yield self.at(call, message, fix)
            yield from self._update_per_micro_batch(model, training)

    @staticmethod
    def _missing_update(model: FileModel, training: TrainingLoop, call: Event, updates: list[Event]) -> str | None:
        scaler = call.scaler if call.kind is Kind.STEP else call.receiver
        what = f"`{scaler}.step()`" if call.kind is Kind.STEP else f"`{scaler}.unscale_()`"
        mine = [u for u in updates if same_scaler(u.receiver, scaler)]
        if not mine:
            short = last_part(scaler or "")
            if "update" in model.index.methods_called.get(short, set()) or \
                    short in model.index.passed and _handed_on(model, short):
                return None  # updated somewhere the model does not place in this loop, or handed on
            if call.kind is Kind.SCALER_UNSCALE:
                return None  # the step (reported, if at all) is what needs the update
            return (f"{what} runs but `{scaler}.update()` is never called: the next step raises "
                    "RuntimeError and the loss scale never adapts")
        later = [u for u in mine if u.order > call.order and not exclusive(u.conds, call.conds)]
        if not later or any(not extra_conds(u, call) for u in later):
            return None
        for update in later:
            extra = extra_conds(update, call)
            skips = [c for c in extra if is_skip_branch(c, update.loop)]
            if skips and not all(_updated_before_exit(c, later) for c in skips):
                return (f"{what} runs, but a branch that skips the rest of the iteration (`continue`, or a "
                        f"`return` of the step function) before `{scaler}.update()` skips the update on some "
                        f"iterations: the next {'step' if call.kind is Kind.STEP else 'unscale_'} raises RuntimeError")
            tested = [c for c in extra if not _updated_in_other_branch(c, scaler, later)
                      and _tests_gradients(model, update, c)]
            if tested:
                return (f"{what} runs, but `{scaler}.update()` runs only when "
                        f"`{_source(tested[0])}` holds, a test of the gradients or their norm: on an "
                        f"iteration it skips, the next {'step' if call.kind is Kind.STEP else 'unscale_'} raises "
                        "RuntimeError (`scaler.step()` already skips non-finite steps itself)")
            guard = training.reader.guard(update.conds, update.order) if update.loop is training.loop else None
            if call.kind is Kind.STEP and guard is not None and guard.kind in (GuardKind.PERIODIC, GuardKind.NOT_PERIODIC) and \
                    training.reader.guard(call.conds, call.order).always:
                return (f"{what} runs on every iteration but `{scaler}.update()` only every N iterations: "
                        "the second step without an update raises RuntimeError")
        return None

    def _update_per_micro_batch(self, model: FileModel, training: TrainingLoop) -> Iterator[Violation]:
        if training.style not in (Style.GUARDED, Style.MICRO_LOOP):
            return
        steps = scaler_steps(training.steps)
        if not steps or not all(training.guard(b).always for b in training.backwards):
            return
        if training.style is Style.GUARDED and not all(training.guard(s).periodic for s in steps):
            return
        for update in training.loop.events(Kind.SCALER_UPDATE):
            if any(same_scaler(update.receiver, s.scaler) for s in steps) and training.guard(update).always:
                fix = move_to_step(model, training, update, "move the update after the scaler step")
                yield self.at(update, f"`{update.receiver}.update()` runs on every micro-batch while "
                                      f"`{steps[0].scaler}.step()` runs only at the accumulation boundary: an "
                                      "update without a step has no inf checks and fails", fix)


def _updated_before_exit(skip: Cond, updates: list[Event]) -> bool:
    """The skip branch calls ``scaler.update()`` itself before its ``continue`` (for ``if finite:
    ... else: continue``, its ``else:``)."""
    branch = "orelse" if skip.branch == "body" else "body"
    return any(c.owner is skip.owner and c.branch == branch for u in updates for c in u.conds)


def _updated_in_other_branch(cond: Cond, scaler: str | None, updates: list[Event]) -> bool:
    """The other branch of the ``if`` that gates one update calls ``update()`` too: an update after an
    ``if`` whose branch skips the rest (``continue``), or one in its ``else`` (read from the code: a
    variant of the loop under a flag of the test may have dropped that branch)."""
    owner = cond.owner
    if type(owner) is not cst.If:
        return False
    if any(c.owner is owner and c.branch != cond.branch for u in updates for c in u.conds):
        return True
    other = owner.orelse if cond.branch == "body" else owner.body
    return other is not None and any(
        type(n) is cst.Call and (m := method(n)) is not None and m[1] == "update" and same_scaler(dotted(m[0]), scaler)
        for n in walk(other))


# Calls whose result says something about the gradients' values after `unscale_()`.
_FINITE_TESTS = frozenset({"isfinite", "isnan", "isinf"})


def _tests_gradients(model: FileModel, update: Event, cond: Cond) -> bool:
    """``cond`` reads the gradients: a clipping call or a finiteness test in it, a name bound to
    one in the function that holds the update (``norm = clip_grad_norm_(...)``, ``if norm <= 5:``), or a
    flag set under such a test there (``if norm > allowed: skip = True`` ... ``if not skip:``)."""
    test = cond.meaning
    if test is None or not isinstance(cond.owner, cst.If):
        return False
    scope = update.origin if update.origin is not None else model.module
    derived: set[str] = set()
    flags: list[tuple[cst.If, set[str]]] = []
    for node in walk(scope):
        if isinstance(node, cst.Assign) and _reads_gradients(node.value, derived):
            derived.update(n for t in node.targets for n in names_in(t.target))
        elif isinstance(node, cst.If):
            flags.append((node, {n for stmt in walk(node.body) if isinstance(stmt, cst.Assign)
                                 and isinstance(stmt.value, cst.Name) and stmt.value.value in ("True", "False")
                                 for t in stmt.targets for n in names_in(t.target)}))
    for owner, set_here in flags:
        if set_here and _reads_gradients(owner.test, derived):
            derived |= set_here
    return _reads_gradients(test, derived)


def _reads_gradients(expr: cst.CSTNode, derived: set[str]) -> bool:
    for node in walk(expr):
        if isinstance(node, cst.Call):
            name = last_part(dotted(node.func) or "")
            if name in CLIP_FUNCTIONS or name in _FINITE_TESTS:
                return True
        elif isinstance(node, cst.Attribute) and node.attr.value == "grad" \
                or isinstance(node, cst.Name) and node.value in derived:
            return True
    return False


def _source(cond: Cond) -> str:
    text = source(cond.test)
    return ("not " if cond.negated else "") + text if len(text) <= 40 else text[:37] + "..."


# Built-ins that read what they are handed and keep nothing of it.
_READERS = frozenset({"print", "str", "repr", "isinstance", "hasattr", "getattr", "id", "type", "len", "vars"})


def _handed_on(model: FileModel, short: str) -> bool:
    """Some call the scaler is handed to may update it, or keep it for something else to update:
    anything but a built-in that only reads it, a function of this file whose parameter only reads it
    (`train_one_epoch(model, loader, scaler)`, where `scaler.step(...)` / `scaler is None` is all that
    is done with it), or a function of a project module called for its effect alone
    (`utils.restart_from_checkpoint(path, scaler=scaler)`: the project's facts would show an update
    at the call, and a statement keeps nothing it returns)."""
    statements = {id(node.value) for node in walk(model.module, into_functions=True)
                  if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call)}
    for call in model.index.calls:
        handed = [a for a in call.args if (name := dotted(a.value)) is not None and last_part(name) == short]
        if not handed:
            continue
        if _keeps_nothing(model, call, statements):
            continue
        if not all(_only_read(model, call, arg, statements) for arg in handed):
            return True
    return False


def _keeps_nothing(model: FileModel, call: cst.Call, statements: set[int]) -> bool:
    """A built-in that only reads, or a project function called for its effect alone."""
    return (dotted(call.func) or "") in _READERS or \
        model.project is not None and id(call) in statements and model.project.defines(call)


def _only_read(model: FileModel, call: cst.Call, arg: cst.Arg, statements: set[int]) -> bool:
    """``call`` is to the one function of this file so named, whose parameter receiving ``arg`` is only
    tested (`p is None`, `if p:`), has methods other than ``update`` called on it, or is handed to what
    keeps nothing of it (`save_checkpoint(model, p)` of a project module) there."""
    own = own_call_name(call)
    candidates = model.index.functions.get(own, []) if own is not None else []
    if len(candidates) != 1 or arg.star:
        return False
    fn = candidates[0]
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if params[:1] == ["self"]:
        if not isinstance(call.func, cst.Attribute):
            return False  # `train(...)` naming a method: not the call it looks like
        params = params[1:]
    if arg.keyword is not None:
        param = arg.keyword.value
        if param not in params and param not in [p.name.value for p in fn.params.kwonly_params]:
            return False
    else:
        position = [a for a in call.args if a.keyword is None].index(arg)
        if any(a.star for a in call.args[:call.args.index(arg)]) or position >= len(params):
            return False
        param = params[position]
    uses = read = 0
    for node in walk(fn.body, into_functions=True):
        if isinstance(node, cst.Name) and node.value == param:
            uses += 1
        elif isinstance(node, cst.Arg):
            read += node.keyword is not None and node.keyword.value == param  # `f(p=...)` names, not uses
        elif isinstance(node, cst.Call):
            read += sum(_is(a.value, param) for a in node.args) if _keeps_nothing(model, node, statements) else 0
        elif isinstance(node, cst.Attribute) and _is(node.value, param):
            if node.attr.value == "update":
                return False
            read += 1
        elif isinstance(node, cst.Comparison):
            read += _is(node.left, param) + sum(_is(c.comparator, param) for c in node.comparisons)
        elif isinstance(node, (cst.If, cst.While)):
            read += _is(node.test, param)
        elif isinstance(node, cst.UnaryOperation):
            read += _is(node.expression, param)
        elif isinstance(node, cst.BooleanOperation):
            read += _is(node.left, param) + _is(node.right, param)
        elif isinstance(node, cst.IfExp):
            read += _is(node.test, param)
        elif isinstance(node, cst.Return) and node.value is not None:
            read += _returned_to_itself(model, call, node.value, param, last_part(dotted(arg.value) or ""))
    return uses == read


def _returned_to_itself(model: FileModel, call: cst.Call, value: cst.BaseExpression, param: str, short: str) -> int:
    """How many times ``return value`` hands ``param`` back to the caller's own name for it, and nothing
    more: ``return classifier, opt, scaler, epoch`` where the call is ``classifier, optimizer, scaler,
    start_epoch = load_checkpoint(..., scaler=scaler)`` (the scaler comes back to the name it left)."""
    returned = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    positions = [k for k, e in enumerate(returned) if _is(e, param)]
    if not positions:
        return 0
    for node in walk(model.module, into_functions=True):
        if isinstance(node, cst.Assign) and node.value is call and len(node.targets) == 1:
            target = node.targets[0].target
            names = [dotted(e.value) for e in target.elements] if isinstance(target, cst.Tuple) else [dotted(target)]
            if len(names) == len(returned) and all(last_part(names[k] or "") == short for k in positions):
                return len(positions)
    return 0


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name
