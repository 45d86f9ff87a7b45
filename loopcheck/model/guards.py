"""What the conditions around an event mean for how often it runs in its loop.

Only patterns whose meaning is certain are classified; everything else is ``UNKNOWN`` and rules
stay silent on it. ``(i + 1) % N == 0`` is the accumulation boundary, ``i % N == 0`` with a 0-based
``i`` the window start, a test on names the loop never assigns (``args.clip > 0``) is invariant.
Conditions combine (``need_update and not skip``, an ``if`` nested in the step branch) and flags
built over several statements (``need = False; if (i + 1) % N == 0 or last: need = True``) are
followed. Counters are read as real code writes them: ``enumerate`` indices, ``step += 1``,
global counters (``ni = i + nb * epoch``) and thresholds (``n >= N`` with ``n = 0`` in the step
branch, ``ni - last_opt_step >= accumulate``).

A reader may hold *assumptions*: truth values of invariant flags (``args.amp``, ``self.use_ema``)
for one variant of the loop; such a flag then reads as ``ALWAYS`` or ``NEVER``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Kind, Loop
from loopcheck.model.iterators import is_data_loop
from loopcheck.model.micro_steps import counted, last_of
from loopcheck.model.syntax import (dotted, func_name, int_value, last_part, method, names_in, param_names, positional,
                                    same, small_statements, source, walk)
from loopcheck.patterns import Pattern


class GuardKind(enum.Enum):
    ALWAYS = "every iteration"
    NEVER = "no iteration"
    PERIODIC = "every N iterations"
    NOT_PERIODIC = "all but every N-th iteration"
    LAST = "last iteration"
    SYNC = "accelerate sync step"
    NOT_SYNC = "accelerate non-sync step"
    INVARIANT = "invariant"  # only as an atom: a condition that is the same on every iteration
    UNKNOWN = "unknown"


class Phase(enum.Enum):
    BOUNDARY = "fires on the last micro-batch of each window"
    START = "fires on the first micro-batch of each window"
    OFF = "fires on another micro-batch"
    LATE = "fires one micro-batch after the last of each window (every window is N + 1 long)"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Guard:
    kind: GuardKind
    modulus: cst.BaseExpression | None = field(default=None, repr=False)  # N of a periodic guard
    index: str | None = None  # the counter tested
    phase: Phase = Phase.UNKNOWN
    # PERIODIC: True `... or last batch` (the partial last window is stepped too), False a plain
    # periodic test, None `... or <something else>`
    flush: bool | None = False
    test: cst.BaseExpression | None = field(default=None, repr=False)
    partial: bool = False  # holds on only some of those iterations (another, unknown condition too)
    # PERIODIC: the counter starts again with every pass over the data (an enumerate index, a count
    # set before the loop) or runs on across passes (a global step); None where unknown
    restarts: bool | None = None
    # LAST: the last iteration of a micro-step loop of exactly ``modulus`` iterations (``i == N - 1``
    # in ``for i in range(N):``), which is also the boundary of its one window
    micro: bool = False

    @property
    def always(self) -> bool:
        return self.kind is GuardKind.ALWAYS

    @property
    def periodic(self) -> bool:
        return self.kind in (GuardKind.PERIODIC, GuardKind.SYNC)

    @property
    def never(self) -> bool:
        return self.kind is GuardKind.NEVER

    @property
    def window_unknown(self) -> bool:
        """Periodic, but on some boundaries of two periodic tests (one nested in the other): it never
        holds between boundaries, but how many micro-batches a window holds the file shows only as
        the product of the two counts, if at all."""
        return self.kind is GuardKind.PERIODIC and self.modulus is None and self.partial


ALWAYS = Guard(GuardKind.ALWAYS)
NEVER = Guard(GuardKind.NEVER)
_UNKNOWN = Guard(GuardKind.UNKNOWN)
_INVARIANT = Guard(GuardKind.INVARIANT)
_PERIODIC_KINDS = (GuardKind.PERIODIC, GuardKind.NOT_PERIODIC)
_PURE_CALLS = {"len", "isinstance", "hasattr", "getattr", "callable", "int", "float", "bool", "str"}
# Calls whose value is the same for the whole run: the process's place in a distributed job.
_RUN_CONSTANT_CALLS = {"get_rank", "get_world_size", "get_local_rank", "is_initialized", "is_available",
                       "is_main_process", "is_master", "is_primary", "is_rank_zero", "is_dist_avail_and_initialized",
                       "is_distributed", "get_global_rank", "is_local_main_process"}
_CONFIG_ROOTS = ("args", "cfg", "config", "opt", "opts", "hparams", "flags", "FLAGS", "training_args", "conf",
                 "self.args", "self.cfg", "self.config", "self.hparams", "self.opt", "train_config")
_CONFIG_ROOT_NAMES = {root.rsplit(".", 1)[-1] for root in _CONFIG_ROOTS}
# `self.global_step > warmup` changes over the run even where the loop never assigns it (a method
# the model cannot see may): such attributes are never read as flags.
_COUNTER_LIKE = Pattern(r"(^|_)(steps?|iters?|iterations?|epochs?|count|counter|idx|index|updates|samples|"
                        r"tokens|seen|done|loss|losses|time|t)$|^(n|num|cur|current|global|total|completed)_", re.I)
# What a step function's caller counts its calls by (ignite's `engine.state.iteration`); not epochs.
_CALL_COUNTER = Pattern(r"(^|_)(iterations?|iters?|steps?|count|counter)$", re.I)
# Attributes a library changes on every iteration (Accelerate's sync flag).
_PER_ITERATION = ("sync_gradients", "gradient_state", "is_accumulating", "training")
# A flag the caller of a step method sets before every call to say that this call only accumulates
# (`self.is_grad_accumulation_step`): the complement of a window's boundary, as Accelerate's
# `sync_gradients` is the boundary; never a setting of the run.
ACCUMULATING_CALL = Pattern(r"^self\.is_(grad_|gradient_)?accumulation_step$")
# The count of a micro-step loop that is not nested in another loop (a step function's): an
# accumulation count or the pieces of a split batch.
_MICRO_COUNT = Pattern(r"accum|micro|chunk|split|sub_?batch", re.I)
_CONFIG_LIKE = Pattern(r"accum|max_|min_|warmup|freq|interval|every|period|_size$|^(is|use|has|do|with|enable|"
                       r"should|disable|no|skip)_", re.I)


# -- the algebra of guards ---------------------------------------------------------------
def _same_set(a: Guard, b: Guard) -> bool:
    """Two periodic guards hold on the same iterations (or, of opposite kinds, on complementary ones)."""
    return a.index == b.index and a.phase is b.phase and a.flush == b.flush and same(a.modulus, b.modulus) \
        and not a.partial and not b.partial


def negate(guard: Guard) -> Guard:
    flip = {GuardKind.PERIODIC: GuardKind.NOT_PERIODIC, GuardKind.NOT_PERIODIC: GuardKind.PERIODIC,
            GuardKind.SYNC: GuardKind.NOT_SYNC, GuardKind.NOT_SYNC: GuardKind.SYNC,
            GuardKind.ALWAYS: GuardKind.NEVER, GuardKind.NEVER: GuardKind.ALWAYS}
    if guard.partial:
        return _UNKNOWN  # not (a subset of P) is not a set we can name
    if guard.kind is GuardKind.LAST and guard.micro:
        return replace(_window_boundary(guard), kind=GuardKind.NOT_PERIODIC)  # every micro-step but the last
    if guard.kind in flip:
        return replace(guard, kind=flip[guard.kind])
    if guard.kind is GuardKind.INVARIANT:
        return guard
    return _UNKNOWN


_negate = negate


def _window_boundary(last: Guard) -> Guard:
    """The last iteration of a loop of exactly N micro-steps as the boundary ``(i + 1) % N == 0`` of
    its one window of N."""
    return Guard(GuardKind.PERIODIC, modulus=last.modulus, index=last.index, phase=Phase.BOUNDARY, test=last.test,
                 restarts=True)


def both(a: Guard, b: Guard) -> Guard:
    """The guard of ``a and b``."""
    kinds = {a.kind, b.kind}
    if GuardKind.NEVER in kinds:
        return NEVER
    for x, y in ((a, b), (b, a)):
        if x.kind is GuardKind.ALWAYS:
            return y
        if x.kind is GuardKind.INVARIANT:  # a flag read as set (outside variants): `args.clip and P` is P
            return y if y.kind is not GuardKind.ALWAYS else x
    if kinds <= set(_PERIODIC_KINDS) and _same_set(a, b):
        return a if a.kind is b.kind else NEVER
    if kinds == {GuardKind.SYNC, GuardKind.NOT_SYNC}:
        return NEVER
    if a.kind is b.kind and a.kind in (GuardKind.SYNC, GuardKind.NOT_SYNC, GuardKind.LAST):
        return a
    for x, y in ((a, b), (b, a)):
        # a step branch with a second, unknown condition inside (`if need_update: if not skip: step()`):
        # it still runs on window boundaries only
        if x.kind in (GuardKind.PERIODIC, GuardKind.SYNC) and y.kind in (GuardKind.UNKNOWN, GuardKind.LAST):
            return replace(x, partial=True)
    if kinds == {GuardKind.PERIODIC} and not a.partial and not b.partial:
        # a second periodic test inside the step branch (`if actual_step % N == 0: glb_step += 1` and
        # `if glb_step % M == 0: step()`): some boundaries of a window that is no longer N, and which
        # length the two tests only give together (the `window_unknown` of the guard)
        return replace(a, partial=True, modulus=None, phase=Phase.UNKNOWN, flush=None)
    return _UNKNOWN


def either(a: Guard, b: Guard) -> Guard:
    """The guard of ``a or b``."""
    kinds = {a.kind, b.kind}
    if GuardKind.ALWAYS in kinds:
        return ALWAYS
    for x, y in ((a, b), (b, a)):
        if x.kind is GuardKind.NEVER:
            return y
    if kinds == {GuardKind.INVARIANT}:
        return a
    if kinds <= set(_PERIODIC_KINDS) and _same_set(a, b):
        return a if a.kind is b.kind else ALWAYS
    if kinds == {GuardKind.SYNC, GuardKind.NOT_SYNC}:
        return ALWAYS
    if a.kind is b.kind and a.kind in (GuardKind.SYNC, GuardKind.NOT_SYNC, GuardKind.LAST):
        return a
    for x, y in ((a, b), (b, a)):
        if x.kind is GuardKind.PERIODIC and x.partial and y.kind is GuardKind.LAST and not y.partial:
            return replace(x, flush=True)  # `(i % N == 0 and i > 0) or last`: some boundaries, and the last batch
        if x.kind is GuardKind.PERIODIC and not x.partial and y.kind is GuardKind.LAST:
            if not y.partial:
                return replace(x, flush=True)
            if same(x.modulus, y.modulus):
                return x  # the last window is stepped in passes shorter than N only: the longer ones carry it
        if x.kind is GuardKind.PERIODIC and not x.partial:
            return replace(x, flush=None, phase=Phase.UNKNOWN)
    return _UNKNOWN


def _mux(cond: Guard, then: Guard, otherwise: Guard) -> Guard:
    """The value of a name set to ``then`` where ``cond`` holds and left at ``otherwise`` elsewhere."""
    if then.kind is otherwise.kind and then == otherwise:
        return then
    return either(both(cond, then), both(negate(cond), otherwise))


# -- flags ---------------------------------------------------------------------------------
def _literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return expr.value == "True"
    value = int_value(expr)
    return None if value is None else value != 0


def flag_form(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """``x is None`` -> (x, False); ``x is not None`` / ``x`` -> (x, True); else (test, True)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and dotted(test.left) is not None:
        comparison = test.comparisons[0]
        if isinstance(comparison.comparator, cst.Name) and comparison.comparator.value == "None":
            if isinstance(comparison.operator, (cst.IsNot, cst.NotEqual)):
                return test.left, True
            if isinstance(comparison.operator, (cst.Is, cst.Equal)):
                return test.left, False
    return test, True


_KEYS: dict[cst.BaseExpression, tuple[str, bool]] = {}  # per file: flag_key of a test node
# per file: names its classes store as they were handed (`self.args = args`, `args = self.args`):
# `self.args.fp16` in a method and `args.fp16` in a helper the method passes `args` to are one flag
# (found when first needed: most files test no `self.` flag)
_STORED: list[set[str] | Mapping[str, list[cst.BaseExpression]]] = [{}]


def flag_key(test: cst.BaseExpression) -> tuple[str, bool]:
    """The text a flag is known by, and whether ``test`` holds when that flag is set."""
    found = _KEYS.get(test)
    if found is None:
        expr, positive = flag_form(test)
        text = source(expr).replace(" ", "")
        if text.startswith("self.") and text.count(".") > 1 and text.split(".", 2)[1] in _stored():
            text = text[5:]  # `self.args.fp16` -> `args.fp16`
        found = _KEYS[test] = (text, positive)
    return found


def _stored() -> set[str]:
    known = _STORED[0]
    if not isinstance(known, set):
        known = _STORED[0] = stored_as_given(known)
    return known


def stored_as_given(values: Mapping[str, list[cst.BaseExpression]]) -> set[str]:
    """The short names ``X`` the file both holds as ``X`` and stores as ``self.X`` of the same object
    (``self.args = args`` in a constructor, or ``args = self.args`` in a method)."""
    found = set()
    for name, assigned in values.items():
        for value in assigned:
            kind = type(value)
            if kind is cst.Name and value.value == name or kind is cst.Attribute and value.attr.value == name \
                    and type(value.value) is cst.Name and value.value.value == "self":  # type: ignore[attr-defined]
                found.add(name)
                break
    return found


# the operator of a comparison's complement: `N == 1` holds exactly where `N != 1` fails
_COMPLEMENTS = {cst.Equal: "!=", cst.NotEqual: "==", cst.LessThanEqual: ">", cst.GreaterThan: "<=",
                cst.LessThan: ">=", cst.GreaterThanEqual: "<"}


def complement_keys(test: cst.BaseExpression) -> list[str]:
    """The flag keys of the complement of a one-operator comparison (``N == 1`` -> ``N!=1``); against
    1, also the one a count (never below 1) gives: ``N == 1`` -> ``N>1`` and back (X-CLIP's ``if N ==
    1: zero_grad()`` before the backward, its step in the ``else:`` of ``if N > 1:``)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return []
    kind = type(test.comparisons[0].operator)
    operator = _COMPLEMENTS.get(kind)
    if operator is None or flag_form(test)[0] is not test:
        return []
    left, right = source(test.left), source(test.comparisons[0].comparator)
    keys = [f"{left}{operator}{right}".replace(" ", "")]
    if int_value(test.comparisons[0].comparator) == 1 and kind in _COUNT_COMPLEMENTS:
        keys.append(f"{left}{_COUNT_COMPLEMENTS[kind]}1".replace(" ", ""))
    return keys


_COUNT_COMPLEMENTS = {cst.Equal: ">", cst.GreaterThan: "=="}


def forget_flag_keys(values: Mapping[str, list[cst.BaseExpression]] | None = None) -> None:
    """Drop the cache of the previous file (its nodes are no longer needed); ``values``: what the
    next file assigns to each name (``Index.values``), read for ``stored_as_given`` when first needed."""
    _KEYS.clear()
    _STORED[0] = values if values is not None else set()


def _past_exits(conds: tuple[Cond, ...], name: str) -> tuple[Cond, ...]:
    """The conditions of a local's assignment less the early exits it comes after (``if not
    torch.isfinite(loss): return`` in a step helper, before ``need_step = (i + 1) % N == 0``): a later
    reading in the iteration comes after them too, and runs only where the assignment did."""
    return conds if "." in name else tuple(c for c in conds if c.branch != "after-exit")


def _shared_conds(assignments: list[Assignment]) -> tuple[Cond, ...]:
    """The conditions every one of ``assignments`` runs under (the prefix their tuples share)."""
    shared = assignments[0].conds
    for assignment in assignments[1:]:
        n = 0
        while n < min(len(shared), len(assignment.conds)) and assignment.conds[n] == shared[n]:
            n += 1
        shared = shared[:n]
    return shared


def _branch_group(found: list[Assignment], start: int) -> int:
    """The end of the longest run of assignments from ``start`` that are the branches of one
    ``if``/``elif``/``else`` chain (each under its own branch; together on every iteration their
    shared conditions allow), else ``start + 1``."""
    for end in range(len(found), start + 1, -1):
        group = found[start:end]
        shared = len(_shared_conds(group))
        if _covers([a.conds[shared:] for a in group]):
            return end
    return start + 1


def _covers(paths: list[tuple[Cond, ...]]) -> bool:
    """Condition paths, each under its own branch, that together hold on every iteration: a test,
    then paths on both of its sides that cover again (``if a: / elif b: / else:``)."""
    if any(not p for p in paths):
        return len(paths) == 1
    first = paths[0][0]
    if first.test is None or any(p[0].test is not first.test for p in paths):
        return False
    sides = ([p[1:] for p in paths if not p[0].negated], [p[1:] for p in paths if p[0].negated])
    return all(side and _covers(side) for side in sides)


def at_most_one(assumptions: Mapping[str, bool], n: str) -> bool:
    """Whether the assumed flags leave the count ``n`` (its text, without spaces) no value above 1:
    ``n <= 1`` (or ``n < 2``, ``n == 1``) assumed true, or ``n > 1`` (``n >= 2``, ``n != 1``) false."""
    held = {f"{n}<=1", f"{n}<2", f"{n}==1", f"1>={n}", f"2>{n}", f"1=={n}"}
    failed = {f"{n}>1", f"{n}>=2", f"{n}!=1", f"1<{n}", f"2<={n}", f"1!={n}"}
    return any(assumptions.get(key) is (key in held) for key in held | failed)


class GuardReader:
    """Classifies conditions of one loop (the loop decides which names vary per iteration)."""

    def __init__(self, loop: Loop, int_inits: dict[str, set[int | None]],
                 assumptions: Mapping[str, bool] | None = None) -> None:
        self.loop = loop
        self.int_inits = int_inits
        self.assumptions = assumptions if assumptions is not None else loop.assumptions
        self.variant = _steady(loop, loop.assigned_names())
        self._outer_variant: set[str] | None = None
        self._counted: tuple[str, cst.BaseExpression] | None = None  # see _last_micro_step
        self._counted_read = False
        self.aliases: dict[str, list[Assignment]] = {}
        for assignment in loop.assignments:
            for name in assignment.names:
                self.aliases.setdefault(name, []).append(assignment)
        # the rules ask again and again for the guards of the same events (four of five asks repeat one)
        self._guards: dict[tuple[tuple[Cond, ...], int | None], Guard] = {}

    def guard(self, conds: tuple[Cond, ...], order: int | None = None) -> Guard:
        key = (tuple(conds), order)
        found = self._guards.get(key)
        if found is None:
            found = self._guards[key] = self._guard(*key)
        return found

    def _guard(self, conds: tuple[Cond, ...], order: int | None) -> Guard:
        result = ALWAYS
        for cond in conds:
            if cond.reads is not None:
                atom = self._predicate(cond, order)
            else:
                atom = self.atom(cond.test, cond.negated, order, 0) if cond.test is not None else _UNKNOWN
            result = both(result, atom)
        return ALWAYS if result.kind is GuardKind.INVARIANT else result

    def _predicate(self, cond: Cond, order: int | None) -> Guard:
        """``if should_step(i, n):`` read as what the predicate returns; the call stays the guard's
        test (what findings point at, and what no fix rewrites as if it were the expression)."""
        guard = self.atom(cond.reads, cond.negated, order, 0)  # type: ignore[arg-type]
        return replace(guard, test=cond.test) if guard.test is not None else guard

    def atom(self, test: cst.BaseExpression, negated: bool, order: int | None, depth: int) -> Guard:
        guard = self._positive(test, order, depth)
        guard = negate(guard) if negated else guard
        return _window_boundary(guard) if guard.kind is GuardKind.LAST and guard.micro else guard

    def _positive(self, test: cst.BaseExpression, order: int | None, depth: int) -> Guard:
        if depth > 8:
            return _UNKNOWN
        kind = type(test)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
            return negate(self._positive(test.expression, order, depth + 1))
        if kind is cst.BooleanOperation:
            left = self._positive(test.left, order, depth + 1)
            right = self._positive(test.right, order, depth + 1)
            if type(test.operator) is cst.And:
                return self._short_pass_last(test, left, right) or self._neither(test, left, right) \
                    or both(left, right)
            guard = either(left, right)
            return replace(guard, test=test) if guard.kind in _PERIODIC_KINDS else guard
        literal = _literal(test)
        if literal is not None:
            return ALWAYS if literal else NEVER
        if self.assumptions:
            key, positive = flag_key(test)
            if key in self.assumptions:
                return ALWAYS if self.assumptions[key] == positive else NEVER
        name = dotted(test)
        if name is not None and name.endswith("sync_gradients"):
            return Guard(GuardKind.SYNC, test=test)
        if name is not None and name in self.aliases:
            value = self._name_value(name, order, depth)
            if value is not None:
                return value
        if name is not None and ACCUMULATING_CALL.match(name) and name not in self.aliases:
            return Guard(GuardKind.NOT_SYNC, test=test)
        micro = self._last_micro_step(test)
        if micro is not None:
            return micro
        modular = self._modular(test, order)
        if modular is not None:
            return modular
        threshold = self._threshold(test, order)
        if threshold is not None:
            return threshold
        wrapped = self._wrapped(test, order)
        if wrapped is not None:
            return wrapped
        last = self._last(test)
        if last is not None:
            if last and self._past_the_end(test):
                return NEVER
            return Guard(GuardKind.LAST, test=test) if last else _UNKNOWN
        if self._call_count_compared(test):
            return _UNKNOWN  # `if iteration == 0:` in a step function: one call, as `i == 0` is one iteration
        if self._invariant(test):
            return _INVARIANT
        return _UNKNOWN

    def _call_count_compared(self, test: cst.BaseExpression) -> bool:
        """``iteration == 0`` (or ``!=``, with a number) in a step function handed its call count as a
        parameter (``def optimize_parameters_accumulate_grd(self, iteration)``): the count changes with
        every call, so the test holds on some calls only, not on every one as an unchanging value would."""
        if type(test) is not cst.Comparison or len(test.comparisons) != 1 \
                or type(test.comparisons[0].operator) not in (cst.Equal, cst.NotEqual):
            return False
        sides = (test.left, test.comparisons[0].comparator)
        return any(type(side) is cst.Name and side.value in self.loop.per_call and not self.varies(side.value)
                   and _CALL_COUNTER.search(side.value) is not None and int_value(other) is not None
                   for side, other in (sides, sides[::-1]))

    def _short_pass_last(self, test: cst.BooleanOperation, left: Guard, right: Guard) -> Guard | None:
        """``len(loader) <= N and (i + 1) == len(loader)`` (the old Hugging Face scripts and Trainer):
        the last batch of a pass no longer than N. A partial LAST with N as its modulus: ``(i + 1) % N
        == 0 or <it>`` steps the last window of such short passes only, not that of a longer pass."""
        for last, guard, other in ((test.right, right, test.left), (test.left, left, test.right)):
            if guard.kind is not GuardKind.LAST or not isinstance(last, cst.Comparison) \
                    or not isinstance(other, cst.Comparison) or len(other.comparisons) != 1:
                continue
            op, length, window = other.comparisons[0].operator, other.left, other.comparisons[0].comparator
            if isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan)):
                length, window = window, length
            elif not isinstance(op, (cst.LessThanEqual, cst.LessThan)):
                continue
            sides = (last.left, last.comparisons[0].comparator)
            if any(same(length, side) for side in sides) and self._invariant(window):
                return Guard(GuardKind.LAST, modulus=window, test=test, partial=True)
        return None

    def _neither(self, test: cst.BooleanOperation, left: Guard, right: Guard) -> Guard | None:
        """``(i + 1) % N != 0 and (i + 1) != len(loader)``: neither a boundary nor the last batch, the
        complement of a step test that also steps the last window (written for ``continue``)."""
        for guard, other in ((left, test.right), (right, test.left)):
            if guard.kind is GuardKind.NOT_PERIODIC and not guard.partial and guard.flush is False \
                    and self._last(other) is False:
                return replace(guard, flush=True, test=test)
        return None

    # -- names set in the loop --------------------------------------------------------------
    def _name_value(self, name: str, order: int | None, depth: int) -> Guard | None:
        """The guard a boolean name set earlier in the iteration stands for: ``need = (i + 1) % N == 0``,
        or ``need = False`` followed by ``if <test>: need = True`` (if/else assignments too, and the
        branches of an if/elif/else chain, some under tests that cannot be read)."""
        found = sorted((a for a in self.aliases.get(name, []) if order is None or a.order < order),
                       key=lambda a: a.order)
        if not found or any(a.op != "=" or a.in_loop is not None or dotted(a.value) == name for a in found):
            return None
        value: Guard | None = None
        pending: tuple[Guard, Guard] | None = None  # (cond, value) of a conditional first assignment
        start = 0
        while start < len(found):
            assignment, end = found[start], _branch_group(found, start)
            group, start = found[start:end], end
            if len(group) > 1:
                # `if i == 0: need = False / elif (i + 1) % N == 0: need = True / else: need = False`: one
                # branch of the chain runs on every iteration, so the name holds where a branch setting
                # it holds does (under an unknown branch condition: on some of those iterations)
                shared = _shared_conds(group)
                cond = self.guard(_past_exits(shared, name), assignment.order)
                values = [self._positive(branch.value, branch.order, depth + 1) for branch in group]
                assigned = values[0]
                if any(v != values[0] for v in values):
                    assigned = NEVER
                    for branch, branch_value in zip(group, values):
                        assigned = either(assigned, both(self.guard(branch.conds[len(shared):], branch.order),
                                                         branch_value))
            else:
                assigned = self._positive(assignment.value, assignment.order, depth + 1)
                cond = self.guard(_past_exits(assignment.conds, name), assignment.order)
            if cond.kind is GuardKind.UNKNOWN:
                return None
            if value is None and not cond.always:
                if pending is None:
                    pending = (cond, assigned)
                    continue
                # `if c: x = a` then `else: x = b`: together they set x on every iteration
                first_cond, first_value = pending
                if either(first_cond, cond).always and both(first_cond, cond).never:
                    value = _mux(first_cond, first_value, assigned)
                    pending = None
                    continue
                return None
            value = assigned if value is None else _mux(cond, assigned, value)
        if pending is not None or value is None:
            return None
        if value.kind in _PERIODIC_KINDS or value.kind is GuardKind.LAST:
            return value
        return value if value.kind in (GuardKind.ALWAYS, GuardKind.NEVER, GuardKind.SYNC, GuardKind.NOT_SYNC) \
            else None

    def _alias(self, name: str, order: int | None) -> cst.BaseExpression | None:
        """``ni = i + nb * epoch`` earlier in the loop: the name means its value."""
        found = [a for a in self.aliases.get(name, []) if a.op == "=" and (order is None or a.order < order)]
        if len(found) == 1 and not found[0].conds and not isinstance(found[0].value, cst.Call) \
                and dotted(found[0].value) != name:
            return found[0].value
        return None

    # -- (i + k) % N == C ------------------------------------------------------------------
    def _modular(self, test: cst.BaseExpression, order: int | None) -> Guard | None:
        negated = False
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comparison = test.comparisons[0]
            if isinstance(comparison.operator, cst.NotEqual):
                negated = True
            elif not isinstance(comparison.operator, cst.Equal):
                return None
            mod, compared = test.left, comparison.comparator
        else:
            # `if (i + 1) % N:` is true when NOT on the boundary
            mod, compared, negated = test, cst.Integer("0"), True
        slip = precedence_slip(mod)
        if slip is not None:
            # `i + 1 % N == 0` is `i + (1 % N) == 0`: it means `(i + 1) % N == 0` and holds on no
            # micro-batch of a counter from 0 once N > 1 (LC106 says so); its window is the intended one
            mod = cst.BinaryOperation(cst.BinaryOperation(mod.left, mod.operator, slip.left), cst.Modulo(), slip.right)
        if not (isinstance(mod, cst.BinaryOperation) and isinstance(mod.operator, cst.Modulo)):
            return None
        count = self.count(mod.left, order)
        if count.index is None:
            return None
        if count.restarts is None and not negated and int_value(compared) == 0 \
                and self._reset_on_boundary(test, mod.left, count.index):
            count = replace(count, restarts=self._set_per_pass(count.index))
        modulus = mod.right
        if int_value(modulus) == 1:
            return _UNKNOWN
        if self._assumed_one(modulus):
            # the `else:` of `if N > 1:` steps every micro-batch, even by `(i + 1) % N == 0`
            target = int_value(compared)
            if target is None and not _is_minus_one(compared, modulus):
                return _UNKNOWN
            holds = target in (0, None)  # x % 1 is 0, and so is N - 1
            return ALWAYS if holds != negated else NEVER
        phase = Phase.UNKNOWN
        if count.first is not None:
            target = int_value(compared)
            if target is None and _is_minus_one(compared, modulus):
                target = -1
            if target is not None:
                # the k-th micro-batch (1-based) sees first + k - 1: a boundary test holds at k = N
                phase = {1: Phase.BOUNDARY, 0: Phase.START}.get(count.first - target, Phase.OFF)
        if slip is not None:
            phase = Phase.OFF
        guard = Guard(GuardKind.PERIODIC, modulus=modulus, index=count.index, phase=phase, test=test,
                      restarts=count.restarts)
        return negate(guard) if negated else guard

    def _reset_on_boundary(self, test: cst.BaseExpression, counted: cst.BaseExpression, name: str) -> bool:
        """``if n % N == 0: step; n = 0`` (DSS's ``aveGrad``): ``n`` is a multiple of N wherever it is
        set back to 0, so the reset moves no boundary and the count runs on as if never reset."""
        resets = [a for a in self.aliases.get(name, []) if a.op != "AddAssign"]
        return dotted(counted) == name and bool(resets) and all(
            a.op == "=" and a.names == (name,) and int_value(a.value) == 0 and _inside(a, test, name) for a in resets)

    def _last_micro_step(self, test: cst.BaseExpression) -> Guard | None:
        """``i == N - 1`` in ``for i in range(N):`` (``i == len(chunks) - 1`` in ``for i, c in
        enumerate(chunks):``): the last of the loop's N micro-steps. Alone it is the boundary of a
        window of exactly N (``atom`` reads it as ``(i + 1) % N == 0``); beside another test (``(i +
        1) % N == 0 or i == len(micro_batches) - 1``) it is the last batch, as before. Read so only
        in a micro-step loop: nested in another loop (the window is one of its iterations) or
        counting an accumulation by name, that steps the optimizer itself (a PGD attack loop's
        ``if t != K - 1: model.zero_grad()`` before the step after it is no window), and not over the
        data (``i == len(loader) - 1`` is the last batch of an epoch)."""
        if type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return None
        if not self._counted_read:  # once per reader: a micro-step loop's index and count
            self._counted = counted(self.loop) if self.loop.events(Kind.STEP) else None
            self._counted_read = True
        found = self._counted
        if found is None:
            return None
        index, count = found
        last = last_of(test, index, count)
        if last is None or any(self.varies(n) for n in names_in(count)) or is_data_loop(self.loop) \
                or not (self.loop.parent is not None and self.loop.parent.is_loop or _MICRO_COUNT.search(source(count))):
            return None
        if self._assumed_one(count):
            return ALWAYS if last else NEVER
        guard = Guard(GuardKind.LAST, modulus=count, index=index, test=test, micro=True)
        return guard if last else negate(guard)

    def _assumed_one(self, modulus: cst.BaseExpression) -> bool:
        """Whether the variant's flags leave ``modulus`` no value but 1 (``N > 1`` assumed false;
        at 0 the ``%`` would raise)."""
        return bool(self.assumptions) and at_most_one(self.assumptions, source(modulus).replace(" ", ""))

    # -- n >= N (n reset in the step branch), ni - last_step >= N -------------------------
    def _threshold(self, test: cst.BaseExpression, order: int | None) -> Guard | None:
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        comparison = test.comparisons[0]
        op = comparison.operator
        if isinstance(op, (cst.LessThan, cst.LessThanEqual)):
            return self._below_samples(test, order)
        if not isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)):
            return None
        left, modulus = test.left, comparison.comparator
        extra = 1 if isinstance(op, cst.GreaterThan) else 0  # `n > N` holds one micro-batch later
        # `i - start + 1 == n` with `start = i + 1` in the step branch (torchdrug): since the last step
        offset = int_value(left.right) if isinstance(left, cst.BinaryOperation) and isinstance(
            left.operator, cst.Add) and isinstance(left.left, cst.BinaryOperation) else None
        diff = left.left if offset is not None else left
        since = isinstance(diff, cst.BinaryOperation) and isinstance(diff.operator, cst.Subtract)
        # a window length set anew only in the step branch (the last window of a pass shortened to
        # what is left) is the length of the window that branch starts
        if any(self.varies(n) and not (since and self._set_per_window(n, test)) for n in names_in(modulus)) \
                and not isinstance(op, cst.GreaterThanEqual):
            return None
        if since:
            guard = self._since_last(test, diff, modulus, order, extra, offset or 0)  # type: ignore[arg-type]
            # a length set per window may shorten the last one to what the pass has left: not read
            reset = any(self.varies(n) and self._set_per_window(n, test) for n in names_in(modulus))
            return replace(guard, flush=None) if guard is not None and reset else guard
        name = dotted(left)
        if name is None or not self.varies(name):
            return None
        increments = [a for a in self.aliases.get(name, []) if a.op == "AddAssign"]
        resets = [a for a in self.aliases.get(name, []) if a.op == "="]
        if isinstance(op, cst.GreaterThanEqual) and len(increments) == 1 and _batch_size(increments[0].value):
            return self._sample_window(test, name, increments[0], resets, order, negated=False)
        if not extra and len(increments) == 1 and resets and _counted_otherwise(test, name, increments[0], resets):
            # `if n == N: n = 0; step else: n += 1`: the count stays N on the step's micro-batch, so a
            # window is the N micro-batches that counted up to N and the one that finds it there
            minus_one = isinstance(modulus, cst.BinaryOperation) and isinstance(modulus.operator, cst.Subtract) \
                and int_value(modulus.right) == 1
            return Guard(GuardKind.PERIODIC, modulus=modulus.left if minus_one else modulus,  # type: ignore[union-attr]
                         index=name, phase=Phase.BOUNDARY if minus_one else Phase.LATE, test=test,
                         restarts=self._set_per_pass(name))
        if len(increments) != 1 or int_value(increments[0].value) != 1 or not resets:
            return None
        # `if not loss_nan: loss.backward(); n += 1`: a count of the micro-batches that back-propagate
        counts_backwards = bool(increments[0].conds) and self._counts_backwards(increments[0])
        if increments[0].conds and not counts_backwards:
            return None
        if not all(_inside(reset, test, name) and int_value(reset.value) == 0 for reset in resets):
            return None
        if counts_backwards:
            return Guard(GuardKind.PERIODIC, modulus=modulus, index=name, phase=Phase.UNKNOWN, test=test,
                         restarts=self._set_per_pass(name))
        # On the k-th micro-batch of a window the count is k when it is incremented before the test:
        # `n >= N` holds at k = N (the boundary), `n > N` at k = N + 1 (every window one too long).
        # Incremented after the test, the reset is followed by an increment in the same iteration:
        # only the first window differs, by one.
        before = order is not None and increments[0].order < order
        init = self._fresh_value(name)
        phase = Phase.UNKNOWN
        if init == 0 and before:
            phase = Phase.BOUNDARY if not extra else Phase.LATE
        elif extra:
            phase = Phase.LATE  # whatever the first window, each later one starts from the reset
        return Guard(GuardKind.PERIODIC, modulus=modulus, index=name, phase=phase, test=test,
                     restarts=self._set_per_pass(name))

    def _counts_backwards(self, increment: Assignment) -> bool:
        """Every backward of the loop runs under exactly the conditions of ``increment``."""
        backwards = self.loop.events(Kind.BACKWARD)
        return bool(backwards) and all(b.conds == increment.conds for b in backwards)

    def _below_samples(self, test: cst.Comparison, order: int | None) -> Guard | None:
        """``if seen < K:`` (skip) ``else:`` (step) on a count of samples: the negation of ``seen >= K``."""
        if not isinstance(test.comparisons[0].operator, cst.LessThan):
            return None
        name = dotted(test.left)
        if name is None or not self.varies(name):
            return None
        increments = [a for a in self.aliases.get(name, []) if a.op == "AddAssign"]
        resets = [a for a in self.aliases.get(name, []) if a.op == "="]
        if len(increments) != 1 or not _batch_size(increments[0].value):
            return None
        guard = self._sample_window(test, name, increments[0], resets, order, negated=True)
        return negate(guard) if guard is not None else None

    def _sample_window(self, test: cst.Comparison, name: str, increment: Assignment, resets: list[Assignment],
                       order: int | None, negated: bool) -> Guard | None:
        """``seen += x.shape[0]`` on every micro-batch, ``if seen >= K:`` step and ``seen = 0``: a window
        that closes once K samples are gathered, ``ceil(K / B)`` micro-batches of B samples. How many
        that is the file does not say (no N to divide by: the modulus is unknown)."""
        branch = [next((i for i, c in enumerate(r.conds) if c.test is test and c.negated is negated), None)
                  for r in resets]
        if not resets or any(i is None or int_value(r.value) != 0 for i, r in zip(branch, resets)):
            return None
        # the count grows wherever the test is read (both under `if x.shape[0] != 0:`, or neither)
        if any(increment.conds != r.conds[:i] for i, r in zip(branch, resets)):  # type: ignore[misc]
            return None
        before = order is not None and increment.order < order
        phase = Phase.BOUNDARY if before and self._fresh_value(name) == 0 else Phase.UNKNOWN
        return Guard(GuardKind.PERIODIC, modulus=None, index=name, phase=phase, test=test,
                     restarts=self._set_per_pass(name))

    # -- k == C with k kept in range(N): `k += 1; k = k % N` or `k = (k + 1) % N` ------------
    def _wrapped(self, test: cst.BaseExpression, order: int | None) -> Guard | None:
        """A counter wrapped modulo N every iteration (lingua's ``acc_step``) tested against a constant
        is ``(count) % N == C``: on the k-th micro-batch of a window it holds ``k % N`` once wrapped."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1) or order is None:
            return None
        op, target = test.comparisons[0].operator, int_value(test.comparisons[0].comparator)
        name = dotted(test.left)
        if target is None or not isinstance(op, (cst.Equal, cst.NotEqual)) or name is None or not self.varies(name):
            return None
        found = self.aliases.get(name, [])
        if any(a.conds or a.order > order for a in found):
            return None
        wraps = [a for a in found if a.op == "=" and isinstance(a.value, cst.BinaryOperation)
                 and isinstance(a.value.operator, cst.Modulo)]
        increments = [a for a in found if a.op == "AddAssign"]
        if len(wraps) != 1 or len(found) != len(wraps) + len(increments) or len(increments) > 1:
            return None
        wrap = wraps[0].value
        assert isinstance(wrap, cst.BinaryOperation)
        before = dotted(wrap.left) == name and len(increments) == 1 and increments[0].order < wraps[0].order \
            and int_value(increments[0].value) == 1
        inside = not increments and isinstance(wrap.left, cst.BinaryOperation) and isinstance(
            wrap.left.operator, cst.Add) and dotted(wrap.left.left) == name and int_value(wrap.left.right) == 1
        modulus = wrap.right
        if not (before or inside) or any(self.varies(n) for n in names_in(modulus)) or int_value(modulus) == 1:
            return None
        # from a fresh 0 the k-th micro-batch of a window sees k % N: 0 on the last, 1 on the first
        phase = {0: Phase.BOUNDARY, 1: Phase.START}.get(target, Phase.OFF) if self._fresh_value(name) == 0 \
            else Phase.UNKNOWN
        guard = Guard(GuardKind.PERIODIC, modulus=modulus, index=name, phase=phase, test=test,
                      restarts=self._set_per_pass(name))
        return negate(guard) if isinstance(op, cst.NotEqual) else guard

    def _set_per_window(self, name: str, test: cst.BaseExpression) -> bool:
        """Every assignment of ``name`` in the loop runs only where ``test`` holds."""
        assignments = self.aliases.get(name, [])
        return bool(assignments) and all(_inside(a, test) for a in assignments)

    def _since_last(self, test: cst.Comparison, diff: cst.BinaryOperation, modulus: cst.BaseExpression,
                    order: int | None, extra: int, offset: int = 0) -> Guard | None:
        """``ni - last_opt_step >= accumulate`` with ``last_opt_step = ni`` in the step branch (yolov5), or
        ``i - start + 1 == n`` with ``start = i + 1`` there (``offset`` 1)."""
        counter, last = dotted(diff.left), dotted(diff.right)
        if counter is None or last is None or not self.varies(counter):
            return None

        def marks_counter(value: cst.BaseExpression) -> bool:
            if not offset:
                return dotted(value) == counter
            return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) \
                and dotted(value.left) == counter and int_value(value.right) == offset

        marks = [a for a in self.aliases.get(last, [])]
        if not marks or not all(a.op == "=" and _inside(a, test) and marks_counter(a.value) for a in marks):
            return None
        count = self.count(diff.left, order)
        if count.index is None:
            return None
        phase = Phase.UNKNOWN
        last_init = self._fresh_value(last)
        if count.first is not None and last_init is not None and extra == 0:
            # the first step comes when first + k - 1 - last_init + offset >= N, i.e. after N micro-batches
            phase = Phase.BOUNDARY if count.first - last_init + offset == 1 else Phase.UNKNOWN
        restarts = count.restarts if count.restarts is False else (self._set_per_pass(last) and count.restarts)
        return Guard(GuardKind.PERIODIC, modulus=modulus, index=count.index, phase=phase, test=test,
                     restarts=restarts)

    # -- counters --------------------------------------------------------------------------
    def count(self, expr: cst.BaseExpression, order: int | None, depth: int = 0) -> Count:
        """What ``expr`` counts: the counter's name, its value on the first micro-batch of a fresh
        run, and whether it starts again with every pass over the data."""
        if depth > 4:
            return Count(None)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
            k = int_value(expr.right)
            if k is not None:
                inner = self.count(expr.left, order, depth + 1)
                shift = k if isinstance(expr.operator, cst.Add) else -k
                return replace(inner, first=inner.first + shift if inner.first is not None else None)
            if isinstance(expr.operator, cst.Add):
                for counted, other in ((expr.left, expr.right), (expr.right, expr.left)):
                    if any(self.varies(n) for n in names_in(other)):
                        continue
                    inner = self.count(counted, order, depth + 1)
                    if inner.index is None:
                        continue
                    # `i + nb * epoch`: runs on across epochs, zero on the first one
                    grows = self._grows_per_pass(other)
                    if grows is not None:
                        return replace(inner, first=inner.first if grows else None, restarts=False)
                    return replace(inner, first=None)
            return Count(self._variant_name(expr))
        appended = self._appended_once(expr)
        if appended is not None:
            return Count(f"len({appended})")
        keyed = self._keyed_call_counter(expr)
        if keyed is not None:
            return Count(keyed)  # `state["iteration"]` of a state dict the caller passes on every call
        name = dotted(expr)
        if name is not None and name == self.loop.engine_counter and not self.varies(name):
            return Count(name, 1, False)  # ignite's count of the calls: 1 first, on across epochs
        if name is not None and not self.varies(name) and (name in self.loop.per_call or self._call_counter(name)):
            return Count(name)  # a step function's call counter: its start is not visible here
        if name is None or not self.varies(name):
            return Count(self._variant_name(expr))
        for assignment in self.aliases.get(name, []):
            if assignment.op == "for":
                shift = self.shifted_before(name, order)
                if shift is None:
                    return Count(name)
                first = self._enumerate_first(assignment, name)
                return Count(name, first + shift if first is not None else None, True)
        alias = self._alias(name, order)
        if alias is not None:
            inner = self.count(alias, order, depth + 1)
            if inner.index is not None:
                return inner
            return Count(name)
        increments = [a for a in self.aliases.get(name, []) if a.op == "AddAssign"]
        others = [a for a in self.aliases.get(name, []) if a.op != "AddAssign"]
        if len(increments) != 1 or increments[0].conds or int_value(increments[0].value) != 1:
            return Count(name)
        init = self._fresh_value(name)
        if others and not self._reset_to_start(name, others, init, increments[0].order, order):
            return Count(name)
        before = order is not None and increments[0].order < order
        first = init + 1 if init is not None and before else init
        # reset in the loop (by an evaluation branch): the windows start again there, so where each
        # pass ends in its window is not known
        return Count(name, first, None if others else self._set_per_pass(name))

    def shifted_before(self, name: str, order: int | None) -> int | None:
        """How much the loop body adds to its own ``for`` variable before the test at ``order``
        (``for step, data in enumerate(bar): step += 1``: a 1-based count from there on); None where
        it is rebound some other way (or under a condition) before the test."""
        shift = 0
        for assignment in self.aliases.get(name, []):
            if assignment.op == "for" or order is not None and assignment.order > order or assignment.scope is not None:
                continue  # (a helper's local of that spelling is another variable)
            value = assignment.value
            if assignment.op == "AddAssign" and not assignment.conds and int_value(value) is not None:
                shift += int_value(value)  # type: ignore[operator]
            elif assignment.op == "=" and not assignment.conds and type(value) is cst.BinaryOperation \
                    and type(value.operator) is cst.Add and dotted(value.left) == name \
                    and int_value(value.right) is not None:
                shift += int_value(value.right)  # type: ignore[operator]
            else:
                return None
        return shift

    @staticmethod
    def _reset_to_start(name: str, resets: list[Assignment], init: int | None, increment: int,
                        order: int | None) -> bool:
        """``nb_tr_examples, nb_tr_steps = 0, 0`` in the loop's evaluation branch, with ``nb_tr_steps = 0``
        before the loop: the counter starts again from its first value, so the micro-batch after the
        reset sees what the first one of the run saw. Not between the increment and the test, which
        would then see the reset value instead of the counted one."""
        return init is not None and order is not None and all(
            a.op == "=" and int_value(a.value_of(name)) == init and not increment < a.order < order for a in resets)

    def _call_counter(self, name: str) -> bool:
        """``engine.state.iteration`` in ignite's ``def update(engine, batch)``: a counter the caller keeps
        on an object it passes (not ``self``: a framework's ``self.global_step`` counts updates)."""
        root, _, rest = name.partition(".")
        return bool(rest) and root != "self" and root in self.loop.per_call and \
            _CALL_COUNTER.search(last_part(name)) is not None

    def _keyed_call_counter(self, expr: cst.BaseExpression) -> str | None:
        """``state["iteration"]`` in a step function handed a ``state`` dict per call (a hook of a
        trainer that counts its calls there), read like ``engine.state.iteration``; its text, or None."""
        if type(expr) is not cst.Subscript or type(expr.value) is not cst.Name or len(expr.slice) != 1:
            return None
        key = expr.slice[0].slice
        key = key.value if type(key) is cst.Index else None
        if type(key) is not cst.SimpleString or not isinstance(key.evaluated_value, str):
            return None
        root = expr.value.value
        if root == "self" or root not in self.loop.per_call or self.varies(root) \
                or _CALL_COUNTER.search(key.evaluated_value) is None:
            return None
        return f"{root}[{key.value}]"

    def _appended_once(self, expr: cst.BaseExpression) -> str | None:
        """``len(losses)`` where the loop body appends to ``losses`` in one statement of its own top
        level and changes it nowhere else in the loop: it grows by one every iteration, a counter of
        unknown start (its value on a fresh run is not read)."""
        if not (isinstance(expr, cst.Call) and func_name(expr) == "len" and len(expr.args) == 1):
            return None
        listed = dotted(expr.args[0].value)
        node = self.loop.node
        if listed is None or self.varies(listed) or not isinstance(node, (cst.For, cst.While)) or \
                any(listed in a.names for a in _all_assignments(self.loop)):
            return None
        top = [small for small in small_statements(node.body) if isinstance(small, cst.Expr)]
        appends = [small.value for small in top if isinstance(small.value, cst.Call)
                   and func_name(small.value) == f"{listed}.append"]
        changes = [call for call in walk(node.body) if isinstance(call, cst.Call)
                   and func_name(call) in {f"{listed}.{m}" for m in _LIST_CHANGES}]
        return listed if len(appends) == 1 and len(changes) == 1 else None

    def _enumerate_first(self, assignment: Assignment, index: str) -> int | None:
        start = enumerate_start_expr(assignment, index)
        if start is None:
            return None
        # `enumerate(loader, start=start_step + 1)`: the value of a fresh run (no checkpoint loaded)
        return self._fresh_start(start, 0)

    def _fresh_start(self, expr: cst.BaseExpression, depth: int) -> int | None:
        """The value of a resumed start on a fresh run: ``start_step + 1`` with ``start_step = 0``;
        ``completed_steps * args.gradient_accumulation_steps`` (optimizer steps done, in micro-batches)
        is 0 while ``completed_steps`` is, whatever the factor; so is ``done = global_step % per_epoch``,
        a local computed once before the loop from a counter that is 0."""
        value = int_value(expr)
        if value is not None:
            return value
        if isinstance(expr, cst.BinaryOperation):
            left = self._fresh_start(expr.left, depth)
            if isinstance(expr.operator, (cst.Multiply, cst.Modulo, cst.FloorDivide)) and left == 0:
                return 0
            right = self._fresh_start(expr.right, depth)
            if isinstance(expr.operator, cst.Multiply) and right == 0:
                return 0
            if left is None or right is None:
                return None
            return left + right if isinstance(expr.operator, cst.Add) else \
                left - right if isinstance(expr.operator, cst.Subtract) else \
                left * right if isinstance(expr.operator, cst.Multiply) else None
        name = dotted(expr)
        if name is None:
            return None
        value = self._fresh_value(name)
        if value is None and depth < 2 and (computed := self._computed_once(name)) is not None:
            value = self._fresh_start(computed, depth + 1)
        return value

    def _computed_once(self, name: str) -> cst.BaseExpression | None:
        """The value of ``name``'s one plain assignment in the nearest scope that sets it before this
        loop (``done = global_step % per_epoch``), where that scope sets it no other way."""
        outer = self.loop.parent
        while outer is not None:
            found = [a for a in outer.assignments if name in a.names and a.order < self.loop.order]
            if found:
                value = found[0].value_of(name) if len(found) == 1 and found[0].op == "=" else None
                return value if isinstance(value, cst.BaseExpression) else None
            outer = outer.parent
        return None

    def _fresh_value(self, name: str) -> int | None:
        """The integer ``name`` holds when the loop starts on a fresh run: its one literal value set
        before the loop (``global_step = 0``, beside ``global_step = ckpt["step"]`` on resume), or a
        parameter default."""
        outer = self.loop.parent
        while outer is not None:
            literals = {int_value(a.value_of(name)) for a in outer.assignments if name in a.names and a.op == "="
                        and a.order < self.loop.order}
            if literals:
                known = literals - {None}
                if len(known) == 1:
                    return next(iter(known))
                return None
            function = outer.function if not outer.is_loop else None
            if function is not None:
                for param in [*function.params.params, *function.params.kwonly_params]:
                    if param.name.value != name:
                        continue
                    passed = self.int_inits.get(f"{function.name.value}({name})")
                    if passed:  # what the file's calls pass, where they agree on one literal
                        return next(iter(passed)) if len(passed) == 1 and None not in passed else None
                    if param.default is not None:
                        return int_value(param.default)
            outer = outer.parent
        inits = self.int_inits.get(last_part(name), set())
        if len(inits) == 1 and None not in inits:
            return next(iter(inits))
        known = inits - {None}
        if "." in name and len(known) == 1:
            # `self.start_step = 0` in __init__ beside `self.start_step = ckpt["step"]` in a resume
            # method, or an option's literal default: the value of a fresh run
            return next(iter(known))
        return None

    def _set_per_pass(self, name: str) -> bool:
        """Whether ``name`` is set again before each pass of this loop (in the loop or function around it)."""
        outer = self.loop.parent
        if outer is None:
            return False
        fresh = [a for a in outer.assignments if name in a.names and a.op == "=" and a.order < self.loop.order]
        if fresh:
            # `cur_iter = int((epoch - 1) * n_batches) + 1` in `train(..., epoch)`: set where the count
            # stands after the earlier calls' batches, so it runs on across epochs
            return not all(self._batches_of_earlier_calls(_product(a.value)) for a in fresh)
        if not outer.is_loop:
            return False
        # `nb_tr_steps = 0` after this loop in the epoch loop (the old Hugging Face scripts reset their
        # counts after evaluating): it runs before the next pass too. Only a reset to a literal, on every
        # pass or under a setting (not a test of what the epoch loop changes, `if epoch % 5 == 0:`)
        changed = {n for a in outer.assignments for n in a.names}
        return any(name in a.names and a.op == "=" and a.order > self.loop.order
                   and int_value(a.value_of(name)) is not None
                   and all(c.test is not None and not (names_in(c.test) & changed) and self._invariant(c.test)
                           for c in a.conds)
                   for a in outer.assignments)

    def _grows_per_pass(self, term: cst.BaseExpression) -> bool | None:
        """``nb * epoch`` with the epoch loop's counter: True (zero on the first epoch); a term of the
        outer loop's counter of unknown start: False; a term that does not change: None."""
        outer = self.loop.parent
        if outer is None or not outer.is_loop:
            return False if self._batches_of_earlier_calls(term) else None
        for assignment in outer.assignments:
            if assignment.op == "for" and any(n in assignment.names for n in names_in(term)):
                starts = [self._outer_first(assignment, n) for n in assignment.names if n in names_in(term)]
                return all(s == 0 for s in starts)
        return None

    def _batches_of_earlier_calls(self, term: cst.BaseExpression) -> bool:
        """``nb * epoch`` in ``train_one_epoch(..., epoch, ...)`` with ``nb = len(data_loader)`` of the loop's
        loader: the batches of the calls before this one, so the sum runs on across epochs. Also with
        the counter of the loop around (``chunk_idx * (len(examples) // batch_size)`` in a chunk loop,
        the helper that holds it inlined there) and the batches of a range over the examples."""
        function, outer = self.loop.function, self.loop.parent
        if type(term) is not cst.BinaryOperation or type(term.operator) is not cst.Multiply:  # type: ignore[attr-defined]
            return False
        params = param_names(function.params) if function is not None else set()
        if outer is not None and outer.is_loop:
            params |= {n for a in outer.assignments if a.op == "for" for n in a.names}
        loader = names_in(self.loop.node.iter) if type(self.loop.node) is cst.For else set()  # type: ignore[union-attr]
        if type(self.loop.node) is cst.For and type(self.loop.node.iter) is cst.Name and outer is not None:  # type: ignore[union-attr]
            # `batches = tqdm.trange(0, len(examples), batch_size)`, then `for i in batches:`
            bound = [a for a in outer.assignments if a.names == (self.loop.node.iter.value,)]  # type: ignore[union-attr]
            if len(bound) == 1 and bound[0].op == "=":
                loader |= names_in(bound[0].value)
        for factor, other in ((term.left, term.right), (term.right, term.left)):  # type: ignore[attr-defined]
            if type(other) is cst.BinaryOperation and type(other.operator) in (cst.Add, cst.Subtract) \
                    and int_value(other.right) is not None:
                other = other.left  # `(epoch - 1) * nb` of a 1-based epoch
            if dotted(other) not in params:
                continue
            length = factor
            name = dotted(factor)
            if name is not None:
                bound = [a for a in self.loop.parent.assignments if a.names == (name,)] if self.loop.parent else []  # type: ignore[union-attr]
                length = bound[0].value if len(bound) == 1 else factor
            if type(length) is cst.BinaryOperation and type(length.operator) is cst.FloorDivide \
                    and names_in(length.right) and names_in(length.right) <= loader:  # type: ignore[attr-defined]
                # `len(examples) // batch_size` of `range(0, len(examples), batch_size)`: its batches
                length = length.left  # type: ignore[attr-defined]
            if type(length) is cst.Call and func_name(length) == "len" and length.args \
                    and names_in(length.args[0].value) & loader:  # type: ignore[attr-defined]
                return True
        return False

    def _outer_first(self, assignment: Assignment, name: str) -> int | None:
        """The first value of the epoch counter on a fresh run (``range(start_epoch, epochs)`` with
        ``start_epoch = 0`` unless a checkpoint is loaded)."""
        start = enumerate_start_expr(assignment, name)
        if start is None:
            return None
        value = int_value(start)
        if value is None and dotted(start) is not None:
            value = self._fresh_value(dotted(start))  # type: ignore[arg-type]
        return value

    def _variant_name(self, expr: cst.BaseExpression) -> str | None:
        names = sorted(n for n in names_in(expr) if self.varies(n))
        return names[0] if names else None

    def varies(self, name: str) -> bool:
        """Whether ``name`` (or the object it is an attribute of) is reassigned in the loop."""
        return name in self.variant or name.split(".", 1)[0] in self.variant

    def _last(self, test: cst.BaseExpression) -> bool | None:
        """True where ``test`` picks the last batch of a pass (``is_last``, ``(i + 1) == len(loader)``,
        ``i >= len(loader) - 1``), False where it picks every batch but that one (``(i + 1) !=
        len(loader)``, ``not is_last``), None where it is neither."""
        kind = type(test)
        if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
            inner = self._last(test.expression)
            return None if inner is None else not inner
        name = dotted(test)
        if name is not None:
            short = last_part(name).lower()
            return True if any(w in short for w in ("last", "final", "end_of", "is_end")) else None
        if kind is not cst.Comparison or len(test.comparisons) != 1:
            return None
        sides = [test.left, test.comparisons[0].comparator]
        varying = [any(self.varies(n) for n in names_in(side)) for side in sides]
        if not any(varying) or not (any(type(n) is cst.Call and func_name(n) == "len" for side in sides
                                        for n in walk(side)) or any("last" in (dotted(s) or "").lower() for s in sides)
                                    or self._range_end(sides)):
            return None
        op = type(test.comparisons[0].operator)
        if op is cst.NotEqual:
            return False
        if op in (cst.LessThan, cst.LessThanEqual):
            return not varying[0]  # `i + 1 < len(loader)`: every batch but the last
        if op in (cst.GreaterThan, cst.GreaterThanEqual):
            return varying[0]
        return True

    def _past_the_end(self, test: cst.BaseExpression) -> bool:
        """``step == len(loader)`` with ``step`` the 0-based index of ``for step, batch in
        enumerate(loader)``, not rebound in the loop: never true (the last batch is ``len(loader) - 1``),
        so a last-batch clause written so steps nothing."""
        loop = self.loop
        if type(test) is not cst.Comparison or type(test.comparisons[0].operator) is not cst.Equal \
                or type(loop.node) is not cst.For or type(loop.node.target) is not cst.Tuple:
            return False
        first = loop.node.target.elements[0].value if loop.node.target.elements else None
        iterable = unwrap_iterable(loop.iter) if loop.iter is not None else None
        if type(first) is not cst.Name or type(iterable) is not cst.Call or func_name(iterable) != "enumerate" \
                or len(iterable.args) != 1 or any(a.op != "for" and first.value in a.names for a in loop.assignments):
            return False
        data = names_in(iterable.args[0].value) | {n for v in loop.iter_sources for n in names_in(v)}
        for index, length in ((test.left, test.comparisons[0].comparator), (test.comparisons[0].comparator, test.left)):
            if type(index) is cst.Name and index.value == first.value and type(length) is cst.Call \
                    and func_name(length) == "len" and length.args and names_in(length.args[0].value) & data:
                return True
        return False

    def _range_end(self, sides: list[cst.BaseExpression]) -> bool:
        """``epoch == args.n_epochs - 1`` (or ``epoch + 1 == args.n_epochs``) in ``for epoch in
        range(args.n_epochs):``: the comparison names the loop's own last value."""
        node = self.loop.node
        if not self.loop.is_loop or type(node) is not cst.For or type(node.target) is not cst.Name \
                or type(node.iter) is not cst.Call or func_name(node.iter) != "range":
            return False
        bounds = positional(node.iter)  # type: ignore[arg-type]
        if not 1 <= len(bounds) <= 2 or len(bounds) != len(node.iter.args):  # type: ignore[attr-defined]
            return False
        index, stop = node.target.value, source(bounds[-1]).replace(" ", "")
        written = {source(side).replace(" ", "") for side in sides}
        return written in ({index, f"{stop}-1"}, {f"{index}+1", stop})

    def _invariant(self, test: cst.BaseExpression) -> bool:
        for node in walk(test):
            if isinstance(node, cst.Call):
                name = func_name(node)
                if name not in _PURE_CALLS and last_part(name or "") not in _RUN_CONSTANT_CALLS:
                    return False
        for name in names_in(test):
            if self.varies(name):
                return False
            if name.startswith("self.") and not name.startswith(_CONFIG_ROOTS):
                return False
        return True

    # -- flags -----------------------------------------------------------------------------
    def flag(self, test: cst.BaseExpression) -> tuple[str, bool] | None:
        """``(key, positive)`` when ``test`` (an atom, not ``and``/``or``/``not``) is an invariant
        flag of the run that a variant may assume either way: a configuration value (``args.amp``,
        ``cfg.ACCUMULATION_STEPS > 1``), an optional object (``scaler is not None``), an attribute
        flag (``self.use_ema``, ``accelerator.is_main_process``). Names that change in this loop or a
        loop around it (``epoch > 5``) are no flags."""
        if _literal(test) is not None or self._call_count_compared(test):
            return None
        expr, _ = flag_form(test)
        for node in walk(expr):
            if isinstance(node, cst.Call) and (not self._constant_call(node) or func_name(node) == "len"):
                return None  # `len(loader) % N != 0` is about the data, not a setting to assume
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                return None
        names = names_in(expr)
        if not names or any(self.varies(n) or self._varies_outside(n) for n in names):
            return None
        if any(n.endswith(_PER_ITERATION) or ACCUMULATING_CALL.match(n) for n in names) and not self._own_mode(names):
            return None
        self_attributes = [n for n in names if n.startswith(("self.", "cls.")) and not n.startswith(_CONFIG_ROOTS)]
        if self_attributes and any(isinstance(n, cst.BinaryOperation) for n in walk(expr)):
            return None  # `self.step % N`: a count some unseen method may change
        for name in names:
            short = last_part(name)
            if "." in name and not name.startswith(_CONFIG_ROOTS) and _COUNTER_LIKE.search(short) \
                    and not _CONFIG_LIKE.search(short):
                return None
        return flag_key(test)

    def _own_mode(self, names: set[str]) -> bool:
        """``if self.training:`` in a module's own method, in a loop that never switches modes (the
        chunks of one ``forward`` call): the mode is fixed for the call, a flag like any other."""
        return set(names) == {"self.training"} and not self.loop.events(Kind.EVAL_MODE, Kind.TRAIN_MODE, deep=True) \
            and not any(outer.is_loop for outer in _outer_loops(self.loop))

    def _varies_outside(self, name: str) -> bool:
        """``name`` changes from one iteration of an enclosing loop to the next (``epoch``, a value
        computed from it), not merely set again to the same value (``has_no_sync = args.distributed``
        in an epoch function inlined into the epoch loop)."""
        if self._outer_variant is None:
            self._outer_variant = set()
            outer = self.loop.parent
            while outer is not None:
                if outer.is_loop:
                    assigned = {n for a in outer.assignments for n in a.names}
                    for a in outer.assignments:
                        if a.op != "=" or any(n in assigned or n.split(".", 1)[0] in assigned
                                              for n in names_in(a.value)):
                            self._outer_variant |= set(a.names)
                outer = outer.parent
        return name in self._outer_variant or name.split(".", 1)[0] in self._outer_variant

    def _constant_call(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call):
            name = func_name(node)
            return name in _PURE_CALLS or last_part(name or "") in _RUN_CONSTANT_CALLS or _setting_lookup(node)
        return False


def _setting_lookup(call: cst.Call) -> bool:
    """``self.args.get('use_deepspeed', False)``: a setting read by a literal key from a configuration
    mapping, as invariant as ``self.args.use_deepspeed``."""
    func = call.func
    owner = dotted(func.value) if isinstance(func, cst.Attribute) and func.attr.value == "get" else None
    args = positional(call)
    return owner is not None and owner.rsplit(".", 1)[-1] in _CONFIG_ROOT_NAMES \
        and 1 <= len(args) <= 2 and len(call.args) == len(args) and isinstance(args[0], cst.SimpleString) \
        and all(_literal(a) is not None or isinstance(a, cst.SimpleString) for a in args[1:])


# list methods that change its length
_LIST_CHANGES = ("append", "extend", "insert", "pop", "remove", "clear")


@dataclass(frozen=True)
class Count:
    index: str | None
    first: int | None = None  # value on the first micro-batch of a fresh run (None: unknown)
    restarts: bool | None = None  # counts again from `first` on every pass over the data


def _all_assignments(loop: Loop) -> list[Assignment]:
    found = list(loop.assignments)
    for sub in loop.loops:
        found.extend(_all_assignments(sub))
    return found


def _steady(loop: Loop, assigned: set[str]) -> set[str]:
    """``assigned`` without the names the loop only ever sets to one unchanging value (``cfg =
    self.cfg`` in an evaluation helper inlined into the loop): they do not vary per iteration."""
    values: dict[str, set[str]] = {}
    for assignment in _all_assignments(loop):
        for name in assignment.names:
            text = _plain_value(assignment) if len(assignment.names) == 1 else None
            values.setdefault(name, set()).add(text or f"<{id(assignment)}>")
    variant = set(assigned)
    changed = True
    while changed:
        changed = False
        for name in list(variant):
            texts = values.get(name, set())
            if len(texts) != 1:
                continue
            [text] = texts
            if text.startswith("<") or any(part in variant for part in _roots(text)):
                continue
            variant.discard(name)
            changed = True
    return variant


def _plain_value(assignment: Assignment) -> str | None:
    """The text of a value that cannot change by itself: a name or attribute chain, or a literal."""
    if assignment.op != "=":
        return None
    name = dotted(assignment.value)
    if name is not None:
        return name
    return source(assignment.value) if type(assignment.value) in _LITERALS else None


_LITERALS = (cst.Integer, cst.Float, cst.SimpleString)  # exact types: isinstance() on libcst's ABCs is slow


def _roots(text: str) -> set[str]:
    parts = text.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts) + 1)}


def _batch_size(expr: cst.BaseExpression) -> bool:
    """``x.shape[0]``, ``x.size(0)``, ``len(x)``: the number of samples in a micro-batch."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
            and int_value(expr.slice[0].slice.value) == 0
    if isinstance(expr, cst.Call):
        args = positional(expr)
        called = method(expr)
        if called is not None and called[1] == "size":
            return len(args) == 1 and int_value(args[0]) == 0
        return func_name(expr) == "len" and len(args) == 1
    return False


def _inside(assignment: Assignment, test: cst.BaseExpression, counter: str | None = None) -> bool:
    """The assignment runs only where ``test`` holds (it sits in that ``if``'s body). With ``counter``,
    also where ``test`` is one conjunct of that ``if``'s test and no other conjunct reads the counter
    (``if n == N and phase == 'train': n = 0``): a guard beside the count does not move the window's
    end, as in the ``%`` reading of the same test."""
    for c in assignment.conds:
        if c.negated or c.test is None:
            continue
        if c.test is test:
            return True
        if counter is not None:
            parts = _conjuncts(c.test)
            if any(p is test for p in parts) and all(p is test or counter not in names_in(p) for p in parts):
                return True
    return False


def _counted_otherwise(test: cst.BaseExpression, name: str, increment: Assignment, resets: list[Assignment]) -> bool:
    """``n += 1`` only in the ``else`` of ``if n == N:`` and ``n = 0`` only in its body, both under
    the same outer conditions."""
    if int_value(increment.value) != 1:
        return False
    mine = [c for c in increment.conds if c.test is test and c.negated]
    if len(mine) != 1:
        return False
    outer = [c for c in increment.conds if c is not mine[0]]
    for reset in resets:
        if int_value(reset.value) != 0 or not _inside(reset, test, name):
            return False
        if [c for c in reset.conds if c.test is not test] != outer:
            return False
    return True


def precedence_slip(expr: cst.BaseExpression) -> cst.BinaryOperation | None:
    """The ``1 % N`` of ``i + 1 % N`` (or ``i - 1 % N``): a counter plus a literal taken modulo
    something else, where ``%`` binds first (``i + (1 % N)`` written so is meant; a tree built from
    ``ast`` keeps no parentheses)."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Subtract) \
            and type(expr.right) is cst.BinaryOperation and not getattr(expr.right, "lpar", ()) \
            and type(expr.right.operator) is cst.Modulo and type(expr.right.left) is cst.Integer \
            and type(expr.left) in (cst.Name, cst.Attribute, cst.Subscript):
        return expr.right
    return None


def slipped(test: cst.BaseExpression) -> cst.BinaryOperation | None:
    """The ``i + 1 % N`` a step test compares (``i + 1 % N == 0 or i + 1 == len(loader)``), if any."""
    stack = [test]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.BooleanOperation:
            stack += [node.left, node.right]  # type: ignore[attr-defined]
        elif kind is cst.UnaryOperation:
            stack.append(node.expression)  # type: ignore[attr-defined]
        elif kind is cst.Comparison and precedence_slip(node.left) is not None:  # type: ignore[attr-defined]
            return node.left  # type: ignore[attr-defined, return-value]
    return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an ``and`` chain (``a and b and c``), or the test itself."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _is_minus_one(expr: cst.BaseExpression, modulus: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)
            and int_value(expr.right) == 1 and same(expr.left, modulus))


_PROGRESS_WRAPPERS = ("tqdm", "track", "progress", "TQDM", "log_every", "Progbar")


def unwrap_iterable(iterable: cst.BaseExpression, through_log_every: bool = False) -> cst.BaseExpression:
    """``tqdm(enumerate(loader))`` -> ``enumerate(loader)``: progress bars yield what they wrap
    (``metric_logger.log_every(...)`` too, where ``through_log_every``)."""
    while isinstance(iterable, cst.Call) and (wrapper := last_part(func_name(iterable) or "")) in _PROGRESS_WRAPPERS \
            and positional(iterable) and (through_log_every or wrapper != "log_every"):
        iterable = positional(iterable)[0]
    return iterable


def enumerate_start_expr(assignment: Assignment, index: str) -> cst.BaseExpression | None:
    """The first value of ``index`` in ``for index, x in enumerate(it, start)`` / ``for index in range(a, b)``
    (``cst.Integer('0')`` where the call leaves it out), or None for other loops."""
    iterable = unwrap_iterable(assignment.value)
    if not isinstance(iterable, cst.Call):
        return None
    name = last_part(func_name(iterable) or "")
    args = positional(iterable)
    if name == "enumerate" and assignment.names and assignment.names[0] == index:
        start = args[1] if len(args) > 1 else next(
            (a.value for a in iterable.args if a.keyword is not None and a.keyword.value == "start"), None)
        return cst.Integer("0") if start is None else start
    if name in ("range", "trange") and assignment.names == (index,):
        return cst.Integer("0") if len(args) == 1 else args[0] if args else None
    return None


def enumerate_start(assignment: Assignment, index: str) -> int | None:
    """``for i, x in enumerate(it, 1)`` -> 1; ``for i in range(a, b)`` -> a."""
    start = enumerate_start_expr(assignment, index)
    return int_value(start) if start is not None else None


def exclusive(a: tuple[Cond, ...], b: tuple[Cond, ...]) -> bool:
    """Whether two sets of conditions can never hold in the same iteration (if/else branches,
    ``use_amp`` against ``not use_amp``)."""
    for ca in a:
        for cb in b:
            if ca.owner is cb.owner and ca.branch != cb.branch and "after-exit" not in (ca.branch, cb.branch):
                return True
            if ca.test is not None and cb.test is not None and ca.negated != cb.negated and same(ca.test, cb.test):
                return True
    return False


def _outer_loops(loop: Loop) -> Iterator[Loop]:
    outer = loop.parent
    while outer is not None:
        yield outer
        outer = outer.parent


def _product(value: cst.BaseExpression) -> cst.BaseExpression:
    """``(epoch - 1) * nb`` of ``int((epoch - 1) * nb) + 1``: the term a count's start is built from."""
    while True:
        if type(value) is cst.Call and func_name(value) in ("int", "round") and len(value.args) == 1:
            value = value.args[0].value
        elif type(value) is cst.BinaryOperation and type(value.operator) is cst.Add and int_value(value.right) is not None:
            value = value.left
        else:
            return value
