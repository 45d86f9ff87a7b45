"""The last accumulation window of a pass over the data, when the step condition never closes it.

With ``if (i + 1) % N == 0: step`` and a loader whose length is not a multiple of N, the last
``len(loader) % N`` micro-batches of an epoch end no window. Their gradients are either *carried*
into the next epoch's first step (that window then sums more than N micro-batches) or *dropped*:
wiped by a zeroing before the next window (``optimizer.zero_grad()`` at the start of each epoch,
or at the window start ``if i % N == 0``). A counter that runs on across epochs (a global step,
``ni = i + nb * epoch``) lets windows span two epochs with exactly N micro-batches each, which is
right, unless an epoch-start zeroing wipes the first part of the spanning window. A 0-based
``if i % N == 0: step`` steps the tail together with the next epoch's first micro-batch (at most N
in that window: the wrong phase is the off-by-one's finding), unless an epoch-start zeroing wipes it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Cond, Event, Kind, Loop
from loopcheck.model.guards import GuardKind, Phase, enumerate_start, exclusive, unwrap_iterable
from loopcheck.model.sentinels import never_equal
from loopcheck.model.syntax import (children, conjuncts, dotted, exit_statement, func_name, int_value, is_zero, keyword,
                                    last_part, last_small, names_in, positional, same, small_statements, source, walk)
from loopcheck.model.summed import SUMMED, cleared
from loopcheck.model.training import Style, TrainingLoop, is_data_loop
from loopcheck.model.values import call_keywords, option_defaults
from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.model import FileModel

_ENDLESS = Pattern(r"cycle|infinite|forever|endless|repeat|looped", re.I)


class Tail(enum.Enum):
    CARRIED = "carried into the next epoch's first step"
    DROPPED = "wiped before the next step"


@dataclass(frozen=True)
class PartialWindow:
    tail: Tail
    zeroing: Event | None  # the zeroing that wipes the tail (DROPPED)
    spans_epochs: bool  # the counter runs on across epochs (only a wiped spanning window is wrong)
    at_refresh: bool = False  # the zeroing runs where a hand-made endless iterator is renewed
    summed: str | None = None  # the window is a sum of losses in this name, set again before each pass (DROPPED)


def partial_window(model: FileModel, training: TrainingLoop) -> PartialWindow | None:
    """How the last, partial window of each pass over the data ends, where it is never stepped."""
    guard = training.step_guard
    if training.style is not Style.GUARDED or guard is None or guard.kind is not GuardKind.PERIODIC:
        return None
    if guard.flush is not False:
        return None  # `... or last batch` steps it (None: `or` something we cannot read)
    loop = training.loop
    if loop.is_loop and not is_data_loop(loop) and not zeroed_every_micro_batch(training):
        zeroing = _zeroing_at_refresh(training)
        if zeroing is not None:
            return PartialWindow(Tail.DROPPED, zeroing, True, at_refresh=True)
    if guard.restarts is None:
        return None
    if not is_data_loop(loop) or _endless(model, loop) or any(_stops(skip, loop, model) for skip in loop.skips):
        return None
    if _ends_at_a_count(loop, guard.index if guard.restarts else None, model) \
            or _capped_at_windows(loop, guard.modulus) or _sampled_in_windows(model, loop, guard.modulus):
        return None  # the pass may end on a window boundary before the loader's last batch
    if all(_once_per_pass(b, loop) for b in training.backwards):
        return None  # `if step == 0: ... backward()`: no micro-batch of a window back-propagates
    summed = training.notes.get(SUMMED)
    if not summed and not any(training.every_iteration(b) for b in training.backwards) \
            and all(training.guard(b).periodic for b in training.backwards):
        return None  # backward only on the step's micro-batch: the last ones of a pass leave no gradient (LC113)
    if zeroed_every_micro_batch(training):
        return None  # no window outlives its micro-batch (the zeroing's own finding, LC101)
    parent = loop.parent
    if parent is None or not parent.is_loop and parent.function is None:
        return None  # a single pass at module level: nothing comes after its tail
    if not parent.is_loop and _runs_once(model, parent.function):
        return None  # the same in `main()` called once from `if __name__ == "__main__":`
    if any(s.order > loop.order for s in parent.events(Kind.STEP)):
        return None  # the leftover window is stepped after the loop
    if isinstance(summed, str):
        # The tail's losses are summed but never back-propagated: lost where each pass sets the sum
        # again (a local of the function that runs the pass, or set in the epoch loop).
        if not _set_before(parent, summed, loop.order) or _batch_count_checked(model, loop, guard.modulus):
            return None
        return PartialWindow(Tail.DROPPED, None, False, summed=summed)
    if _tail_dropped_after(training, guard.index):
        return None  # `if i % N != N - 1: optimizer.zero_grad()` after the loop: the tail is dropped on purpose
    zeroing = _zeroing_between_passes(training)
    if guard.phase is Phase.START and zeroing is None and _starts_at_zero(loop, guard.index):
        return None  # `i % N == 0` steps the tail with the next pass's first micro-batch: at most N in it
    if not guard.restarts and zeroing is None or _batch_count_checked(model, loop, guard.modulus):
        return None
    if guard.restarts:
        return PartialWindow(Tail.DROPPED if zeroing is not None else Tail.CARRIED, zeroing, False)
    return PartialWindow(Tail.DROPPED, zeroing, True)


def _set_before(parent: Loop, name: str, order: int) -> bool:
    """``name = 0`` (or another cleared value) in ``parent``'s own iteration before ``order``."""
    bound = parent.assignments_before(name, order)
    return bool(bound) and bound[-1].op == "=" and cleared(bound[-1].value) and not bound[-1].lifted \
        and not bound[-1].conds


def _zeroing_at_refresh(training: TrainingLoop) -> Event | None:
    """``try: batch = next(it) except StopIteration: ...; it = iter(loader)``: a loop over batches
    that renews its exhausted iterator by hand, whose counter runs on (no window restarts there), and
    whose renewal also zeroes the gradients the step uses (directly, or in a helper it calls there:
    ANCE's ``evaluate_dev()`` runs ``loss.backward(); model.zero_grad()`` on dev batches). The window
    that spans the two passes loses the micro-batches back-propagated before the renewal."""
    loop = training.loop
    handlers = [c.owner for r in loop.events(Kind.LOADER_RESTART) for c in r.conds
                if c.branch == "except" and _catches_stop_iteration(c.owner)]
    if not handlers:
        return None
    index = training.step_guard.index if training.step_guard is not None else None
    if index is None or any(index in a.names and a.op == "=" for a in loop.assignments):
        return None  # the counter is set again in the loop: windows may restart at the renewal
    stepped = {z.receiver for z in training.events(Kind.ZERO_GRAD) if training.guard(z).periodic} \
        | {s.optimizer or s.receiver for s in training.steps}
    stepped.discard(None)

    def under_handler(conds: tuple[Cond, ...]) -> bool:
        return any(c.branch == "except" and any(c.owner is h for h in handlers) for c in conds)

    def zeroings(inner: Loop, outer: tuple[Cond, ...]) -> Iterator[Event]:
        for item in inner.items:
            if isinstance(item, Loop):
                yield from zeroings(item, outer + item.conds)
            elif item.kind is Kind.ZERO_GRAD and under_handler(outer + item.conds) and item.receiver in stepped:
                yield item

    return next(zeroings(loop, ()), None)


def _catches_stop_iteration(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Try) and any(
        handler.type is not None and "StopIteration" in {last_part(n) for n in names_in(handler.type)}
        for handler in node.handlers)


def zeroed_every_micro_batch(training: TrainingLoop) -> bool:
    """A zeroing outside the step branch (or in its ``else:``) of a loop whose every micro-batch
    back-propagates: each backward's gradients are wiped before the next one adds to them."""
    return all(training.every_iteration(b) for b in training.backwards) and any(
        training.guard(z).kind in (GuardKind.ALWAYS, GuardKind.NOT_PERIODIC) for z in training.events(Kind.ZERO_GRAD))


def zeroed_before_the_last_backward(training: TrainingLoop, zero: Event, step: Event) -> bool:
    """``if (it + 1) % N == 0: optim.zero_grad()`` before ``loss.backward()``, then ``if (it + 1) % N ==
    0: optim.step()``: the zeroing fires on the window's last micro-batch, as the step does, but before
    that micro-batch's backward, wiping the N-1 before it (a zeroing at the window's start, ``it % N ==
    0``, is right). Whatever the counter's start, a zeroing under the step's very test does."""
    # the backward after it runs on every micro-batch: the window's (a GAN's generator loss, computed and
    # back-propagated only under the step's test after clearing the discriminator pass's gradients, is none)
    if zero.loop is not training.step_loop or not any(zero.order < b.order < step.order and training.guard(b).always
                                                      for b in training.backwards) \
            or any(s.order < zero.order for s in training.steps):  # after a step it clears what was stepped on
        return False
    mine, stepping = training.guard(zero), training.guard(step)
    # on the step's micro-batch: the same boundary, or the very same test where the counter's start is unknown
    # (`self.args.iter % N == N - 1`, a count resumed from a checkpoint)
    same_batch = mine.phase is Phase.BOUNDARY is stepping.phase or mine.phase is stepping.phase \
        and mine.test is not None and stepping.test is not None and source(mine.test) == source(stepping.test)
    return mine.kind is GuardKind.PERIODIC is stepping.kind and same_batch \
        and not mine.partial and mine.flush is stepping.flush and mine.modulus is not None \
        and stepping.modulus is not None and same(mine.modulus, stepping.modulus)


def _batch_count_checked(model: FileModel, loop: Loop, modulus: cst.BaseExpression | None) -> bool:
    """The code refuses a batch count that is not a multiple of N before training
    (``if len(loader) % N != 0: raise ...``, ``assert n_batches % N == 0`` with ``n_batches = len(loader)``):
    every window of a pass is whole."""
    outer = loop
    while outer.parent is not None and outer.parent.function is outer.function:
        outer = outer.parent
    scope: cst.CSTNode = outer.function if outer.function is not None else model.module
    scopes = [scope]
    holder = _defined_in(model, loop.node)
    if holder is not None and holder is not scope:
        scopes.append(holder)  # a nested `def train_epoch():` the epoch loop calls, inlined there
    counts: set[str] = set()  # names bound to a length: `loader_batches = len(loader)`
    checks: list[tuple[cst.BaseExpression, bool]] = []  # tests that must hold (False: must fail), or the code raises
    calls: list[cst.Call] = []
    for node in (n for s in scopes for n in walk(s)):
        kind = type(node)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.Assign and len(node.targets) == 1 and _has_len(node.value):
            counts.add(dotted(node.targets[0].target) or "")
        elif kind is cst.Assert:
            checks.append((node.test, True))
        elif kind is cst.If and type(last_small(node.body)) is cst.Raise:
            checks.append((node.test, False))
        elif kind is cst.Call:
            calls.append(node)
    batches = _batch_sizes(calls) if checks else {}
    return any(_multiple(test, not holds, counts, modulus, batches) for test, holds in checks)


def _batch_sizes(calls: list[cst.Call]) -> dict[str, list[cst.BaseExpression]]:
    """``DataLoader(dataset, batch_size=bs)``: the batch sizes each data set is loaded with."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for call in calls:
        args = [a for a in call.args if a.keyword is None]
        size = keyword(call, "batch_size") or (args[1].value if len(args) > 1 else None)
        name = dotted(args[0].value) if args else None
        if name is not None and size is not None and last_part(func_name(call) or "").endswith("DataLoader"):
            found.setdefault(name, []).append(size)
    return found


def _defined_in(model: FileModel, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The ``def`` whose body holds ``node``, however deep."""
    owner = model.owner(node)
    while owner is not None and not isinstance(owner, cst.FunctionDef):
        owner = model.owner(owner)
    return owner


def _multiple(test: cst.BaseExpression, negated: bool, counts: set[str], modulus: cst.BaseExpression | None,
              batches: dict[str, list[cst.BaseExpression]] | None = None) -> bool:
    """``test`` holding (failing, where ``negated``) means ``count % N == 0``: ``x % N == 0``, ``not x % N``,
    or ``len(dataset) % (bs * N) == 0`` where every loader of ``dataset`` takes batches of ``bs`` (then
    its batch count is a multiple of N)."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    zero = test
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)) and is_zero(test.comparisons[0].comparator):
        zero, negated = test.left, negated ^ isinstance(test.comparisons[0].operator, cst.Equal)
    if not (negated and isinstance(zero, cst.BinaryOperation) and isinstance(zero.operator, cst.Modulo)):
        return False  # `x % N` alone is true when not a multiple: it must be negated once
    count = zero.left
    if not (_has_len(count) or (dotted(count) or "") in counts):
        return False
    if _counts_modulus(zero.right, modulus):
        return True
    product = zero.right
    if not (batches and isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)
            and isinstance(count, cst.Call) and func_name(count) == "len" and len(count.args) == 1):
        return False
    sizes = batches.get(dotted(count.args[0].value) or "", [])
    return any(_counts_modulus(n, modulus) and sizes and all(same(size, b) for size in sizes)
               for n, b in ((product.right, product.left), (product.left, product.right)))


def _counts_modulus(expr: cst.BaseExpression, modulus: cst.BaseExpression | None) -> bool:
    """``expr`` is the step's modulus N, or names the same setting (``args.accum`` for ``accum``)."""
    name = dotted(expr)
    return same(expr, modulus) or name is not None and name.split(".")[-1] == last_part(dotted(modulus) or "")


def _has_len(expr: cst.BaseExpression) -> bool:
    return any(type(n) is cst.Call and func_name(n) == "len" for n in walk(expr))  # type: ignore[arg-type]


def _once_per_pass(event: Event, loop: Loop) -> bool:
    """``event`` runs under ``step == 0`` (alone or in an ``and``) with ``step`` a counter of ``loop``."""
    counters = set(loop.assignments[0].names) if loop.assignments else set()
    for cond in event.conds:
        if cond.negated or cond.test is None:
            continue
        for part in conjuncts(cond.test):
            if isinstance(part, cst.Comparison) and len(part.comparisons) == 1 \
                    and isinstance(part.comparisons[0].operator, cst.Equal):
                sides = (part.left, part.comparisons[0].comparator)
                if any(dotted(a) in counters and isinstance(b, cst.Integer) for a, b in (sides, sides[::-1])):
                    return True
    return False


def _runs_once(model: FileModel, function: cst.FunctionDef | None, seen: frozenset[int] = frozenset()) -> bool:
    """A top-level function the file calls, and only outside loops: from module-level statements or
    from another top-level function that runs once (``main()`` called from ``if __name__ ==
    "__main__":``, calling ``train(cfg)``), and never hands to anything else (a ``train_one_epoch``
    called per epoch from another module has no call here, and is not this)."""
    if function is None or id(function) in seen:
        return False
    if function not in model.module.body:
        owner = next((stmt for stmt in model.module.body if type(stmt) is cst.ClassDef
                      and any(member is function for member in stmt.body.body)), None)
        return owner is not None and _method_runs_once(model, owner, function, seen)
    name = function.name.value
    calls = [c for c in model.index.calls if func_name(c) == name]
    if name in model.index.passed:
        # `fire.Fire(main)`, `typer.run(main)`: a command-line runner calls it once
        runners = [c for c in model.index.calls if last_part(func_name(c) or "") in _CLI_RUNNERS
                   and any(dotted(a.value) == name for a in c.args)]
        handed = [c for c in model.index.calls if any(dotted(a.value) == name for a in c.args)]
        if not runners or len(runners) != len(handed):
            return False
        calls += runners
    once = _calls_run_once(model)
    return bool(calls) and all(id(c) in once and (once[id(c)] is None or _runs_once(
        model, once[id(c)], seen | {id(function)})) for c in calls)


# Command-line runners that call the function they are handed once: `fire.Fire(main)`, `typer.run(main)`,
# `tyro.cli(main)`, jsonargparse's `CLI(main)`
_CLI_RUNNERS = frozenset({"Fire", "run", "cli", "CLI"})


def _method_runs_once(model: FileModel, owner: cst.ClassDef, method: cst.FunctionDef, seen: frozenset[int]) -> bool:
    """A method the file calls only on instances of its class it builds (``trainer = Trainer(...)``,
    then ``trainer.train()``), each call outside loops of a run that happens once, and never on
    ``self`` (another method may call it per epoch)."""
    name, cls = method.name.value, owner.name.value
    calls = [c for c in model.index.calls if type(c.func) is cst.Attribute and c.func.attr.value == name]
    if any(dotted(c.func.value) == "self" for c in calls):
        return False
    instances = {n for n, values in model.index.values.items()
                 if any(type(v) is cst.Call and func_name(v) == cls for v in values)}
    mine = [c for c in calls if last_part(dotted(c.func.value) or "") in instances]
    once = _calls_run_once(model)
    return bool(mine) and all(id(c) in once and (once[id(c)] is None or _runs_once(
        model, once[id(c)], seen | {id(method)})) for c in mine)


def _calls_run_once(model: FileModel) -> dict[int, cst.FunctionDef | None]:
    """The calls the file makes outside loops, each with the top-level function that makes it (None:
    a module-level statement); read once per file."""
    known = model.read_once.get("calls_run_once")
    if known is None:
        known = model.read_once["calls_run_once"] = {
            id(c): stmt if isinstance(stmt, cst.FunctionDef) else None for stmt in model.module.body
            if not isinstance(stmt, cst.ClassDef)
            for c in _calls_outside_loops(stmt.body if isinstance(stmt, cst.FunctionDef) else stmt)}
    return known  # type: ignore[return-value]


def _calls_outside_loops(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls ``node`` makes on each run of it: none in a loop, a function or a class it holds."""
    if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp,
                         cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return
    if isinstance(node, cst.Call):
        yield node
    for child in children(node):
        yield from _calls_outside_loops(child)


def _starts_at_zero(loop: Loop, index: str | None) -> bool:
    """Each pass counts ``index`` from 0 (``enumerate(loader)``); a resumed ``start=ckpt_step`` can
    put the next pass's first step several micro-batches in, after the carried tail."""
    target = loop.assignments[0] if loop.assignments else None
    return index is not None and target is not None and target.op == "for" and \
        enumerate_start(target, index) == 0


def _tail_dropped_after(training: TrainingLoop, counter: str | None) -> bool:
    """A zeroing right after the batch loop under a test of the loop's counter (icefall's ``if
    sub_batch_idx % params.accum_grad != params.accum_grad - 1: optimizer.zero_grad()``): the code
    knows the last window may be partial and wipes it on purpose."""
    parent = training.loop.parent
    if parent is None or counter is None:
        return False
    return any(zero.order > training.loop.order and any(c.test is not None and counter in names_in(c.test)
                                                         for c in zero.conds)
               for zero in parent.events(Kind.ZERO_GRAD))


def _zeroing_between_passes(training: TrainingLoop) -> Event | None:
    """A zeroing between the end of one pass and the next pass's first step: once per epoch outside
    the batch loop, or at the window start inside it (``if i % N == 0: optimizer.zero_grad()``)."""
    parent = training.loop.parent
    if parent is not None:
        for zero in parent.events(Kind.ZERO_GRAD):
            # (or whenever the pass runs: `if epoch % loader.epoch_interval == 0:` around a pass function
            # that zeroes before its loop)
            if training.guard(zero).always or zero.conds and zero.conds == training.loop.conds \
                    and zero.order < training.loop.order:
                return zero
    guard = training.step_guard
    if guard is None or not guard.restarts:
        return None
    for zero in training.loop.events(Kind.ZERO_GRAD):
        zguard = training.guard(zero)
        if zguard.kind is GuardKind.PERIODIC and zguard.phase is Phase.START and same(zguard.modulus, guard.modulus) \
                and any(b.order > zero.order and not exclusive(b.conds, zero.conds) for b in training.backwards):
            return zero
    return None


def _stops(skip: cst.If, loop: Loop, model: FileModel) -> bool:
    """A loop-top exit that can end the epoch early (``if step >= steps_per_epoch: break``, or the same
    with ``continue``): the last window may then be whole. A resume skip (``if i < start: continue``),
    a skipped bad batch, a guard the index never reaches, or a debugging run's early exit (``if debug:
    if step == 2: break``) cannot."""
    if _never_reached(skip.test, loop) or never_equal(skip.test, loop, model) or _counts_down_a_prefix(skip) \
            or _ends_the_run(skip.test, loop) or _off_by_default(skip.test, model) or _debug_only(skip.test) \
            or _set_only_on_exit(skip, loop, model):
        return False
    if isinstance(exit_statement(skip), (cst.Break, cst.Return)):
        return True
    return any(isinstance(n, cst.ComparisonTarget) and isinstance(n.operator, (cst.GreaterThan, cst.GreaterThanEqual))
               for n in walk(skip.test))


def _set_only_on_exit(skip: cst.If, loop: Loop, model: FileModel) -> bool:
    """``if training_state["stop"]: break`` where the pass sets that flag only right before it leaves
    the loop itself (``training_state["stop"] = True; break`` after a max-steps test), hands its holder
    to no call, and nothing else in the file sets it: within a pass the flag does not change, so the
    exit ends a pass before its first batch or not at all, never part-way."""
    flag = skip.test
    if type(flag) not in (cst.Name, cst.Attribute, cst.Subscript) or not isinstance(loop.node, (cst.For, cst.While)):
        return False
    text, root = source(flag), (dotted(flag) or source(flag)).split(".")[0].split("[")[0]
    inside = {id(n) for n in walk(loop.node.body)}
    if any(type(n) is cst.Assign and id(n) not in inside and any(source(t.target) == text for t in n.targets)
           and not (type(n.value) is cst.Name and n.value.value in ("False", "None") or is_zero(n.value))
           for n in walk(model.module, into_functions=True)):
        return False  # a helper of the file may set it while the pass runs (`= False` before the run cannot)
    found = False
    stack: list[cst.CSTNode] = [loop.node.body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Call and any(root in {n.split(".")[0] for n in names_in(a.value)} for a in node.args):
            return False  # a helper handed the flag's holder may set it
        if kind is cst.IndentedBlock:
            for stmt in node.body:
                if type(stmt) is cst.SimpleStatementLine and any(
                        type(small) is cst.Assign and any(source(t.target) == text for t in small.targets)
                        for small in stmt.body):
                    if type(last_small(node)) not in (cst.Break, cst.Return):
                        return False
                    found = True
        if kind in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda) and node is not loop.node:
            if any(type(n) is cst.AssignTarget and source(n.target) == text for n in walk(node)):
                return False  # set inside an inner loop, whose break ends only that loop
            continue
        stack.extend(children(node))
    return found


def _ends_the_run(test: cst.BaseExpression, loop: Loop) -> bool:
    """``while step <= total: for batch in loader: if step > total: break``: the exit bounds a counter
    that the pass advances and no pass restarts, against bounds neither loop changes, so it fires only
    once the whole run is done; every earlier pass still ends on the loader's last batch."""
    parent = loop.parent
    if parent is None or not parent.is_loop:
        return False
    names = names_in(test)
    if not names & {n for a in loop.assignments if a.op == "AddAssign" for n in a.names}:
        return False
    changed: set[str] = set()  # the pass's own targets and what it rebinds, or what each pass sets
    stack = [loop, parent]
    while stack:
        scope = stack.pop()
        changed.update(n for a in scope.assignments if a.op != "AddAssign" or scope is parent for n in a.names)
        stack.extend(sub for sub in scope.loops if sub is not loop)
    return not names & changed


def _ends_at_a_count(loop: Loop, counter: str | None, model: FileModel) -> bool:
    """A ``break`` (or return) further down the body when a counter of this pass reaches a bound
    (``if (i + 1) // N >= steps_per_epoch: break``): the pass may end after a whole window. A stop on
    a counter that runs on across epochs (``global_step >= max_steps``) ends only the last one."""
    counters = ({counter} if counter else set()) | (set(loop.assignments[0].names) if loop.assignments
                                                     and loop.assignments[0].op == "for" else set())
    if not counters or not isinstance(loop.node, cst.For):
        return False
    stack: list[cst.CSTNode] = [loop.node.body]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.For or kind is cst.While or any(node is skip for skip in loop.skips):
            continue  # a break there ends that inner loop only; loop-top exits are `_stops`'s
        if kind is cst.If and type(last_small(node.body)) in (cst.Break, cst.Return) and any(
                isinstance(n, cst.ComparisonTarget) and isinstance(n.operator, (
                    cst.GreaterThan, cst.GreaterThanEqual, cst.Equal)) for n in walk(node.test)) \
                and names_in(node.test) & counters and not _debug_only(node.test) \
                and not never_equal(node.test, loop, model) and not _off_by_default(node.test, model):
            return True
        stack.extend(children(node))
    return False


def _debug_only(test: cst.BaseExpression) -> bool:
    """``if args.debug and step > 5: break``: a short run for debugging, which a real pass never takes."""
    return any(last_part(name).lower() in _DEBUG_FLAGS for part in conjuncts(test)
               if (name := dotted(part)) is not None)


def _off_by_default(test: cst.BaseExpression, model: FileModel) -> bool:
    """``if args.minibatch_num_train > 0 and i >= args.minibatch_num_train - 1: break`` with the option's
    default 0 (declared in this file, or once in another module of the project): a cap on the
    batches of a pass that the user turns on; a run that does not ask for it takes every batch."""
    for part in conjuncts(test):
        if type(part) is not cst.Comparison or len(part.comparisons) != 1 \
                or type(part.comparisons[0].operator) is not cst.GreaterThan or int_value(part.comparisons[0].comparator) != 0:
            continue
        name = dotted(part.left)
        if name is None or "." not in name:
            continue
        default = _option_default(model, last_part(name))
        if default is not None and default <= 0:
            return True
    return False


def _option_default(model: FileModel, option: str) -> float | None:
    declared = [d for name, d in option_defaults(model.index) if name == option]
    if declared:
        return int_value(declared[0]) if len(declared) == 1 and declared[0] is not None else None
    return model.project.option_default(option) if model.project is not None else None


_DEBUG_FLAGS = frozenset({"debug", "is_debug", "debug_mode", "dry_run", "smoke_test"})


def _capped_at_windows(loop: Loop, modulus: cst.BaseExpression | None) -> bool:
    """The pass takes at most a multiple of N batches (``islice(loader, steps * N)``,
    ``zip(range(steps * N), loader)``): a loader at least that long ends each pass on a whole window."""
    iterable = unwrap_iterable(loop.iter) if loop.iter is not None else None
    if isinstance(iterable, cst.Call) and func_name(iterable) == "enumerate" and positional(iterable):
        iterable = unwrap_iterable(positional(iterable)[0])
    if not isinstance(iterable, cst.Call):
        return False
    name, args = last_part(func_name(iterable) or ""), positional(iterable)
    bounds = args[1:2] if name == "islice" and len(args) == 2 else [
        positional(a)[-1] for a in args if isinstance(a, cst.Call) and func_name(a) == "range" and positional(a)
    ] if name == "zip" else []
    return any(_times(b, modulus) for b in bounds)


def _times(expr: cst.BaseExpression, modulus: cst.BaseExpression | None) -> bool:
    """``steps * N`` or ``N * steps``: a multiple of the accumulation count."""
    return type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply \
        and (same(expr.left, modulus) or same(expr.right, modulus))  # type: ignore[attr-defined]


def _sampled_in_windows(model: FileModel, loop: Loop, modulus: cst.BaseExpression | None) -> bool:
    """``DataLoader(trainset, batch_sampler=CategoriesSampler(labels, args.val_frequency * args.bs, ...))``
    with N ``args.bs``: a sampler asked for a multiple of N batches (an episode sampler's count), so
    each pass may end on a whole window."""
    if modulus is None:
        return False
    for expr in [loop.iter, *loop.iter_sources]:
        loader = _bound_call(model, unwrap_iterable(expr)) if expr is not None else None
        if loader is None or last_part(func_name(loader) or "") != "DataLoader":
            continue
        for name in ("batch_sampler", "sampler"):
            sampler = keyword(loader, name)
            built = _bound_call(model, sampler) if sampler is not None else None
            if built is not None and any(_times(a.value, modulus) for a in built.args):
                return True
    return False


def _bound_call(model: FileModel, expr: cst.BaseExpression) -> cst.Call | None:
    """``expr`` itself where it is a call, or the one call the file binds that name to."""
    for _ in range(3):
        if type(expr) is cst.Call:
            return expr  # type: ignore[return-value]
        name = dotted(expr)
        values = model.index.values.get(last_part(name), []) if name is not None else []
        if len(values) != 1:
            return None
        expr = unwrap_iterable(values[0])
    return None


def _counts_down_a_prefix(skip: cst.If) -> bool:
    """``if steps_trained_in_current_epoch > 0: steps_trained_in_current_epoch -= 1; continue`` (the
    resume skip of the Hugging Face example scripts): it skips the first batches of a pass, counting
    them down, and lets every batch after them through, so the pass still ends on its last batch."""
    test = skip.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.GreaterThan, cst.NotEqual))
            and isinstance(test.comparisons[0].comparator, cst.Integer) and test.comparisons[0].comparator.value == "0"):
        return False
    counter = dotted(test.left)
    if counter is None or not isinstance(last_small(skip.body), cst.Continue):
        return False
    return any(isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.SubtractAssign)
               and dotted(small.target) == counter and isinstance(small.value, cst.Integer)
               and small.value.value == "1"
               for small in small_statements(skip.body))


def _never_reached(test: cst.BaseExpression, loop: Loop) -> bool:
    """``i >= iters`` in ``for i in range(iters)`` (also through a progress wrapper such as
    ``metric_logger.log_every(range(iters), ...)``), where the loop rebinds neither ``i`` nor ``iters``: always false."""
    node = loop.node
    if not (isinstance(node, cst.For) and isinstance(node.target, cst.Name) and isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.GreaterThanEqual)
            and isinstance(test.left, cst.Name) and test.left.value == node.target.value):
        return False
    bound = test.comparisons[0].comparator
    rebound = {node.target.value} | names_in(bound)  # `i` or the bound changed in the loop: it may fire
    if any(rebound & set(a.names) for a in loop.assignments if a.op != "for"):
        return False
    iterable = unwrap_iterable(node.iter, through_log_every=True)
    if not (isinstance(iterable, cst.Call) and func_name(iterable) == "range" and 1 <= len(positional(iterable)) <= 2):
        return False
    return same(positional(iterable)[-1], bound)


def _endless(model: FileModel, loop: Loop) -> bool:
    """``enumerate(cycle(loader))``, a same-file ``def infinite(dl): while True: yield from dl``, or a
    name bound to one before the loop (``dl = cycle(dl)``); also a loader drawing from an endless
    sampler (``DataLoader(dataset, sampler=InfiniteSampler(dataset))``, through a name or a dict of
    its arguments)."""
    sources = [*([loop.iter] if loop.iter is not None else []), *loop.iter_sources]
    calls = [node for expr in sources for node in walk(expr) if isinstance(node, cst.Call)]
    return any(_endless_call(model, call) for call in calls) or any(
        isinstance(sampler, cst.Call) and _endless_call(model, sampler)
        for call in calls if last_part(func_name(call) or "") == "DataLoader" for sampler in _samplers(model, call))


def _samplers(model: FileModel, loader: cst.Call) -> Iterator[cst.BaseExpression]:
    """What ``DataLoader(...)``'s ``sampler`` or ``batch_sampler`` is, as written or as the file binds
    its name, also inside a dict handed over as ``**kwargs``."""
    for name, value, _ in call_keywords(loader, model.index):
        if name not in ("sampler", "batch_sampler"):
            continue
        if isinstance(value, cst.Call) and last_part(func_name(value) or "") == "cast" and len(value.args) == 2:
            value = value.args[1].value  # `cast(Any, sampler)`: the sampler itself
        yield value
        if isinstance(value, cst.Name):
            yield from model.index.values.get(value.value, [])


def _endless_call(model: FileModel, call: cst.Call) -> bool:
    name = last_part(func_name(call) or "")
    if _ENDLESS.search(name):
        return True
    return any(isinstance(n, cst.While) and isinstance(n.test, cst.Name) and n.test.value == "True"
               for fn in model.index.functions.get(name, []) for n in walk(fn, into_functions=True))
