"""Variants of a training loop: one per combination of the invariant flags its branches test.

Real loops branch on configuration that is fixed for a run: ``if args.deepspeed:`` an engine
steps, ``else:`` plain PyTorch does; ``if cfg.ACCUMULATION_STEPS > 1:`` accumulates, ``else:``
steps every batch; ``if scaler is not None:`` scales. Read as one loop, both branches run at once
and the rules give up. Here each combination of those flags is a loop of its own (a *view*: the
same syntax nodes, only the events that run under those flags), and the rules read each view
unchanged. A finding holds when it holds in a variant that can run, and it is one finding however
many variants show it (the syntax node is the same).

Bounded: at most ``MAX_FLAGS`` flags per loop are enumerated (the ones that split the loop most);
flags beyond them are read as today (set, with both branches present).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Event, Framework, Kind, Loop
from loopcheck.model.guards import ACCUMULATING_CALL, GuardReader, complement_keys, flag_key
from loopcheck.model.index import Index
from loopcheck.model.micro_steps import counted, last_of
from loopcheck.model.syntax import children, dotted, names_in, walk
from loopcheck.model.training import Style, TrainingLoop, analyse, is_data_loop
from loopcheck.patterns import Pattern

MAX_FLAGS = 4
_OBJECT_KEY = Pattern(r"^[A-Za-z_][\w.]*$")
_CORE = (Kind.BACKWARD, Kind.STEP, Kind.ZERO_GRAD)


def training_loops(scopes: list[Loop], index: Index,
                   steps_elsewhere: Callable[[cst.FunctionDef], list[Event]] | None = None,
                   per_batch: Callable[[cst.FunctionDef], bool] | None = None) -> list[TrainingLoop]:
    """``steps_elsewhere(fn)``: the optimizer steps of the methods beside ``fn`` in its class;
    ``per_batch(fn)``: the file calls ``fn`` once per iteration of a loop (loopcheck.model.batch_callers)."""
    out: list[TrainingLoop] = []
    for scope in scopes:
        if scope.function is not None and scope.events(Kind.BACKWARD):
            # a step function: its calls are the iterations, where it steps on a counter of them; an
            # ignite process function is the body of the batch loop ignite runs, however it steps
            engine = scope.function in index.process_functions \
                or per_batch is not None and per_batch(scope.function)
            out.extend(t for t in variants(scope, scope, index.int_inits) if engine or _steps_on_call_count(t))
        for loop in _loops(scope):
            if loop.events(Kind.BACKWARD):
                found = variants(scope, loop, index.int_inits)
                if steps_elsewhere is not None and scope.function is not None:
                    found = [_stepped_elsewhere(t, scope.function, steps_elsewhere) for t in found]
                out.extend(found)
    for training in out:
        training.functions = index.functions
    return out


def _stepped_elsewhere(training: TrainingLoop, fn: cst.FunctionDef,
                       steps_elsewhere: Callable[[cst.FunctionDef], list[Event]]) -> TrainingLoop:
    """``def forward(self, *args, max_batch_size=None): for chunk in split(...): backward(loss * frac)``
    beside ``def update(self): optimizer.step()``: a method whose loop back-propagates every chunk of
    one batch and never steps, in a class whose other method steps, accumulates one step's
    gradients over the chunks (the user calls the one, then the other). A loop over the data itself
    is not such a window (an epoch of backward passes feeding a step elsewhere is not read here)."""
    loop = training.loop
    if training.style is not Style.NO_STEP or loop.parent is None or loop.parent.is_loop or is_data_loop(loop) \
            or loop.events(Kind.ZERO_GRAD, Kind.STEP, deep=True):
        return training
    steps = steps_elsewhere(fn)
    if not steps:
        return training
    return replace(training, style=Style.MICRO_LOOP, steps=steps, notes={**training.notes, "steps_elsewhere": True})


def variants(scope: Loop, loop: Loop, int_inits: dict[str, set[int | None]]) -> list[TrainingLoop]:
    """One TrainingLoop per runnable variant of ``loop`` (just the loop itself where nothing branches
    on a flag and no event is dead)."""
    flags, fixed, complements = collect_flags(loop, int_inits)
    found: list[TrainingLoop] = []
    seen: set[tuple[object, ...]] = set()
    scalers = _scaler_flags(loop, int_inits)
    for values in itertools.product((True, False), repeat=len(flags)):
        assumptions = {**loop.assumptions, **fixed, **dict(zip(flags, values))}
        assumptions.update({other: not assumptions[key] for key, other in complements.items() if key in assumptions})
        disabled = {name for name, (key, on) in scalers.items() if key in assumptions and assumptions[key] != on}
        view = _view(scope, loop, assumptions, int_inits, copy=bool(flags or fixed), disabled=disabled)
        if view is None or not view.events(Kind.BACKWARD) or not _runnable(view, assumptions, flags):
            continue
        training = analyse(view, int_inits)
        if training is None:
            continue
        signature = _signature(training)
        if signature in seen:
            continue
        seen.add(signature)
        found.append(training)
    return found


def _steps_on_call_count(training: TrainingLoop) -> bool:
    """A step function's variant steps every N calls, by a ``%`` test of a counter (what the screen
    looks for in functions without a loop), or on the calls its caller does not mark as accumulation
    steps (``if not self.is_grad_accumulation_step:``)."""
    guard = training.step_guard
    if training.style is not Style.GUARDED or guard is None or guard.test is None:
        return False
    # `if should_step(iteration, n):`: the guard points at the call, the predicate's value is read
    read = [c.meaning for s in training.steps for c in s.conds if c.test is guard.test and c.reads is not None]
    return any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
               or isinstance(n, cst.Attribute) and ACCUMULATING_CALL.match(dotted(n) or "")
               for test in (guard.test, *read) for n in walk(test))


# -- which flags -----------------------------------------------------------------------------
def collect_flags(loop: Loop, int_inits: dict[str, set[int | None]]
                  ) -> tuple[list[str], dict[str, bool], dict[str, str]]:
    """The invariant flags the loop's events (and the step events around it) run under: those to
    enumerate both ways, those read one way only, and the complement spellings of flags that the
    loop tests both ways (``if N == 1: zero()`` before the backward, ``if N != 1:`` around the step:
    one flag, the second key set to the opposite of the first).

    Enumerated: flags with different events on each side (an if/else), most important first, and
    flags tested together with a per-iteration condition (``has_no_sync and not need_update``).
    A flag with the same events on both sides (``if naflex: train_step(a) else: train_step(b)``,
    one helper inlined twice) splits nothing. A flag with events on one side only is assumed on
    that side; one in an ``or`` with a per-iteration test (``if not N or (i + 1) % N == 0:``) has
    the event on both sides."""
    reader = GuardReader(loop, int_inits)
    cache: dict[cst.BaseExpression, tuple[str, bool] | None] = {}
    weight: dict[str, int] = {}
    sides: dict[tuple[str, bool], set[tuple[int, Kind]]] = {}
    mixed: set[str] = set()  # tested together with a per-iteration condition
    spelled: dict[str, list[str]] = {}  # flag key -> the keys of its complement comparison
    counted: set[str] = set()  # flags on the accumulation count the step is tested against
    counts = _step_moduli(loop)

    def visit(conds: tuple[Cond, ...], what: tuple[int, Kind] | None, core: bool) -> None:
        for cond in conds:
            if cond.test is None:
                continue
            atoms = list(_atoms(cond.meaning, cond.negated))  # type: ignore[arg-type]
            flags = []
            for atom, negated, required in atoms:
                if atom not in cache:
                    cache[atom] = reader.flag(atom)
                found = cache[atom]
                if found is not None and found[0] not in loop.assumptions:
                    flags.append((found[0], found[1] != negated, required))
                    if counts and names_in(atom) & counts:
                        counted.add(found[0])
                    if found[0] not in spelled and (others := complement_keys(atom)):
                        spelled[found[0]] = others
            per_iteration = len(flags) < len(atoms)
            for key, on, required in flags:
                weight[key] = max(weight.get(key, 0), 2 if core else 1)
                if what is not None:
                    sides.setdefault((key, on), set()).add(what)
                    if per_iteration and not required:
                        # `if not N or (i + 1) % N == 0: step()` steps on both sides of N
                        sides.setdefault((key, not on), set()).add(what)
                if per_iteration:
                    mixed.add(key)

    visit(loop.conds, None, True)
    items = [*loop.events(deep=True), *(loop.parent.events() if loop.parent is not None else [])]
    for event in items:
        visit(event.conds, (id(event.node), event.kind), event.kind in _CORE)
    for sub in _loops(loop):
        visit(sub.conds, (id(sub.node), Kind.BACKWARD), True)
    tested = _tested_names(loop)
    for assignment in loop.assignments:
        if tested & set(assignment.names):
            visit(assignment.conds, (id(assignment.node), Kind.STORE), True)

    complements: dict[str, str] = {}
    for key, others in spelled.items():
        other = next((o for o in others if o in weight), others[0])
        if other in weight and key in weight and key not in complements.values():
            complements[key] = other  # `N != 1` tested too: its sides are this flag's, swapped
            weight[key] = max(weight[key], weight.pop(other))
            for on in (True, False):
                sides.setdefault((key, on), set()).update(sides.pop((other, not on), set()))
            if other in mixed:
                mixed.add(key)
    enumerated: list[tuple[int, int, str]] = []
    fixed: dict[str, bool] = {}
    for key in weight:
        literal = _bound_literal(loop, key)
        if literal is not None:
            fixed[key] = literal  # `train(..., use_amp=True)`: the other side is dead for this call
            continue
        on, off = sides.get((key, True), set()), sides.get((key, False), set())
        if on and off and on != off:
            enumerated.append((3, weight[key], key))  # an if/else with different events on each side
        elif on != off and key not in counted:
            # Events on one side only (`if args.clip: clip()`, `if self.use_ema: ema.update()`): the
            # side that has them is the loop as written; the other only loses events.
            fixed[key] = bool(on)
        elif key in mixed or key in counted:
            # `if N == 1 and i == 0: zero()` beside `if (i + 1) % N == 0: step()`: assuming the one
            # side that has the zeroing would assume N == 1 and read the step as every batch; both
            # counts can run
            enumerated.append((1, weight[key], key))
    enumerated.sort(key=lambda t: (-t[0], -t[1]))
    for key, other in complements.items():
        if key in fixed:
            fixed[other] = not fixed[key]
    return [key for _, _, key in enumerated[:MAX_FLAGS]], fixed, complements


def _step_moduli(loop: Loop) -> set[str]:
    """The names a step of the loop is tested against by ``%`` (``if (i + 1) % N == 0: step()``), or
    the count of a micro-step loop whose last iteration a test of the loop picks (``if i == N - 1:
    step()`` in ``for i in range(N):``, directly or through a name set to it)."""
    found: set[str] = set()
    tests = [cond.meaning for event in loop.events(Kind.STEP, deep=True) for cond in event.conds
             if cond.test is not None]
    for test in tests:
        found.update(name for node in walk(test) if isinstance(node, cst.BinaryOperation)
                     and isinstance(node.operator, cst.Modulo) for name in names_in(node.right))
    micro = counted(loop) if tests else None
    if micro is not None:
        index, count = micro
        values = [a.value for a in loop.assignments if a.op == "="]
        if any(last_of(node, index, count) is not None for test in (*tests, *values) for node in walk(test)):
            found.update(names_in(count))
    return found


def _bound_literal(loop: Loop, name: str) -> bool | None:
    """The truth value ``name`` is given by every assignment before the loop in the loops and
    function around it, where each is a literal (``use_amp = True``, a bound ``use_amp=True`` argument)."""
    outer = loop.parent
    while outer is not None:
        found = [a for a in outer.assignments if a.names == (name,) and a.order < loop.order]
        if found:
            values = {a.value.value if isinstance(a.value, cst.Name) else None for a in found if a.op == "="}
            if len(values) == 1 and len(found) == len([a for a in found if a.op == "="]) \
                    and values <= {"True", "False"}:
                return values == {"True"}
            return None
        outer = outer.parent
    return None


def _atoms(test: cst.BaseExpression, negated: bool, required: bool = True
           ) -> Iterator[tuple[cst.BaseExpression, bool, bool]]:
    """The atoms of a condition: each with whether it is negated and whether the condition can hold
    only where it does (an ``and`` of it; not so in an ``or``, where another atom may hold instead)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _atoms(test.expression, not negated, required)
    elif isinstance(test, cst.BooleanOperation):
        conjunction = isinstance(test.operator, cst.And) != negated
        yield from _atoms(test.left, negated, required and conjunction)
        yield from _atoms(test.right, negated, required and conjunction)
    else:
        yield test, negated, required


def _tested_names(loop: Loop) -> set[str]:
    """Names read in the conditions of the loop's events (flags may be built in the loop first)."""
    names: set[str] = set()
    for event in loop.events(deep=True):
        for cond in event.conds:
            if cond.test is not None:
                names |= {n.value for n in walk(cond.meaning) if isinstance(n, cst.Name)}
    return names


# -- views -----------------------------------------------------------------------------------
def _view(scope: Loop, target: Loop, assumptions: dict[str, bool], int_inits: dict[str, set[int | None]],
          copy: bool, disabled: set[str] = frozenset()) -> Loop | None:  # type: ignore[assignment]
    """``target`` with only what runs under ``assumptions`` (events in dead branches dropped, events
    under contradictory conditions too), inside views of the loops around it; ``target`` itself
    where nothing changes. GradScalers in ``disabled`` pass through: their update/unscale_ do
    nothing, their scale and step are plain. Loops beside the path to ``target`` are shared, not
    copied (dropped when dead)."""
    readers: dict[int, GuardReader] = {}
    path: list[Loop] = []
    outer: Loop | None = target
    while outer is not None:
        path.append(outer)
        outer = outer.parent
    on_path = {id(loop) for loop in path}

    def reader(loop: Loop) -> GuardReader:
        if id(loop) not in readers:
            readers[id(loop)] = GuardReader(loop, int_inits, assumptions)
        return readers[id(loop)]

    def dead(loop: Loop, item: Event | Loop | Assignment, near: bool) -> bool:
        conds = item.conds
        if not conds:
            return False
        if ruled_out(conds, assumptions):
            return True
        # near the loop, a per-iteration contradiction also kills (`not need_update` around `if need_update:`)
        return near and len(conds) > 1 and reader(loop).guard(conds, item.order).never

    def any_dead(loop: Loop, near: bool) -> bool:
        return any(dead(loop, i, near) or isinstance(i, Loop) and id(i) in on_path and any_dead(i, True)
                   for i in loop.items)

    if not copy and not disabled and not any_dead(target, True):
        return target

    def build(loop: Loop, parent: Loop | None) -> Loop:
        near = within(loop, target)
        view = replace(loop, parent=parent, items=[], assumptions=assumptions,
                       assignments=[a for a in loop.assignments if not dead(loop, a, False)],
                       opaque_calls=[c for c in loop.opaque_calls if not ruled_out(loop.opaque_conds.get(id(c), ()),
                                                                                     assumptions)])
        for item in loop.items:
            if dead(loop, item, near):
                continue
            if isinstance(item, Loop):
                view.items.append(build(item, view) if id(item) in on_path or within(item, target) else item)
            elif item.kind in (Kind.SCALER_UPDATE, Kind.SCALER_UNSCALE) and item.receiver in disabled:
                continue
            elif item.scaler in disabled and item.kind in (Kind.BACKWARD, Kind.STEP):
                view.items.append(replace(item, loop=view, scaler=None))
            else:
                view.items.append(replace(item, loop=view))
        return view

    return _find(build(scope, scope.parent), target.node)


def ruled_out(conds: tuple[Cond, ...], assumptions: dict[str, bool]) -> bool:
    """Some condition of ``conds`` is false under the assumed flags alone."""
    return any(c.meaning is not None and _flag_value(c.meaning, c.negated, assumptions) is False for c in conds)


def _flag_value(test: cst.BaseExpression, negated: bool, assumptions: dict[str, bool]) -> bool | None:
    """The truth of a condition from the assumed flags alone (None: it depends on more)."""
    kind = type(test)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _flag_value(test.expression, not negated, assumptions)
    if kind is cst.BooleanOperation:
        left = _flag_value(test.left, False, assumptions)
        right = _flag_value(test.right, False, assumptions)
        if type(test.operator) is cst.And:
            value = False if False in (left, right) else True if left is True and right is True else None
        else:
            value = True if True in (left, right) else False if left is False and right is False else None
    else:
        key, positive = flag_key(test)
        value = None if key not in assumptions else assumptions[key] == positive
    return value if value is None or not negated else not value


def within(loop: Loop | None, target: Loop) -> bool:
    """``loop`` is ``target`` or one of the loops nested in it."""
    outer = loop
    while outer is not None:
        if outer is target:
            return True
        outer = outer.parent
    return False


def _scaler_flags(loop: Loop, int_inits: dict[str, set[int | None]]) -> dict[str, tuple[str, bool]]:
    """GradScalers whose own calls some flag turns on (``if use_amp: scaler.step(optimizer)``, never
    under ``not use_amp``): where that flag is off the scaler is off too (``GradScaler(enabled=use_amp)``),
    so an unconditional ``scaler.scale(loss).backward()`` is plain there."""
    reader = GuardReader(loop, int_inits)
    under: dict[str, set[tuple[str, bool]]] = {}
    for event in [*loop.events(deep=True), *(loop.parent.events() if loop.parent is not None else [])]:
        if event.kind in (Kind.SCALER_UPDATE, Kind.SCALER_UNSCALE):
            name = event.receiver
        elif event.kind in (Kind.BACKWARD, Kind.STEP) and event.framework is Framework.TORCH:
            name = event.scaler
        else:
            continue
        if not name:
            continue
        found = under.setdefault(name, set())
        for cond in event.conds:
            flag = reader.flag(cond.test) if cond.test is not None else None
            if flag is not None:
                found.add((flag[0], flag[1] != cond.negated))
    tied: dict[str, tuple[str, bool]] = {}
    for name, flags in under.items():
        keys = {key for key, _ in flags}
        single = [(key, on) for key, on in flags if (key, not on) not in flags and len(keys) == 1]
        if single and name not in keys:
            tied[name] = single[0]
    return tied


def _loops(loop: Loop) -> Iterator[Loop]:
    for sub in loop.loops:
        yield sub
        yield from _loops(sub)


def _find(scope: Loop, node: cst.CSTNode) -> Loop | None:
    return scope if scope.node is node else next((sub for sub in _loops(scope) if sub.node is node), None)


def _runnable(view: Loop, assumptions: dict[str, bool], flags: list[str]) -> bool:
    """A variant where an object is assumed ``None`` (``scaler is None``) but an event of the loop
    calls it (``scaler.scale(loss).backward()`` under another flag) cannot run."""
    missing = [k for k in flags if not assumptions[k] and _OBJECT_KEY.match(k)]
    if not missing:
        return True
    events = [*view.events(deep=True), *(view.parent.events() if view.parent is not None else [])]
    for event in events:
        used = {event.receiver or "", event.scaler or "", event.optimizer or ""}
        if any(u == k or u.startswith((k + ".", k + "[")) for u in used for k in missing):
            return False
    return True


def _signature(training: TrainingLoop) -> tuple[object, ...]:
    """What the rules can see of a variant: its events (by syntax node) and how often each runs."""
    parts: list[object] = [training.style]
    loops = [training.loop, *( [training.loop.parent] if training.loop.parent is not None else [])]
    for loop in loops:
        for event in loop.events(deep=loop is training.loop):
            guard = training.guard(event)
            parts.append((id(event.node), event.kind, guard.kind, guard.phase, guard.flush, guard.partial))
    return tuple(parts)


__all__ = ["MAX_FLAGS", "collect_flags", "flag_key", "training_loops", "variants"]


def dead_in(node: cst.CSTNode, function: cst.FunctionDef | None, assumptions: dict[str, bool]) -> bool:
    """Whether ``node``, a statement-level call of ``function`` outside its loops' variants (a
    wrap before the loop), sits on a branch the variant's flags rule out: ``if model_is_distributed:
    ... else: model = accelerator.prepare(model)`` is dead where the loop assumes ``model_is_distributed``."""
    if function is None or not assumptions:
        return False
    path = _branches_to(function.body, node)
    return path is not None and any(_flag_value(test, negated, assumptions) is False for test, negated in path)


_NESTED = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


def _branches_to(start: cst.CSTNode, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, bool]] | None:
    """The ``if`` tests (and whether ``node`` is on their else side) from ``start`` down to ``node``."""
    stack: list[tuple[cst.CSTNode, list[tuple[cst.BaseExpression, bool]]]] = [(start, [])]
    while stack:
        current, path = stack.pop()
        if current is node:
            return path
        kind = type(current)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind in _NESTED and current is not start:
            continue
        if kind is cst.If:
            stack.append((current.body, [*path, (current.test, False)]))
            if current.orelse is not None:
                stack.append((current.orelse, [*path, (current.test, True)]))
            continue
        stack.extend((child, path) for child in children(current))
    return None
