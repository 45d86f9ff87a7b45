"""What the conditions around an event mean for how often it runs in its loop.

Only patterns whose meaning is certain are classified; everything else is ``UNKNOWN`` and rules
stay silent on it. ``(i + 1) % N == 0`` is the accumulation boundary, ``i % N == 0`` with a 0-based
``i`` the window start, a test on names the loop never assigns (``args.clip > 0``) is invariant.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Loop
from loopcheck.model.syntax import dotted, func_name, int_value, last_part, names_in, positional, same, walk


class GuardKind(enum.Enum):
    ALWAYS = "every iteration"
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
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Guard:
    kind: GuardKind
    modulus: cst.BaseExpression | None = field(default=None, repr=False)  # N of a periodic guard
    index: str | None = None  # the counter tested
    phase: Phase = Phase.UNKNOWN
    flush: bool | None = None  # `... or last batch`: the partial last window is stepped too
    test: cst.BaseExpression | None = field(default=None, repr=False)

    @property
    def always(self) -> bool:
        return self.kind is GuardKind.ALWAYS

    @property
    def periodic(self) -> bool:
        return self.kind in (GuardKind.PERIODIC, GuardKind.SYNC)


_UNKNOWN = Guard(GuardKind.UNKNOWN)
_INVARIANT = Guard(GuardKind.INVARIANT)
_PURE_CALLS = {"len", "isinstance", "hasattr", "getattr", "callable", "int", "float", "bool", "str"}
_CONFIG_ROOTS = ("args", "cfg", "config", "opt", "opts", "hparams", "flags", "FLAGS", "training_args", "conf",
                 "self.args", "self.cfg", "self.config", "self.hparams", "self.opt", "train_config")


def _negate(guard: Guard) -> Guard:
    flip = {GuardKind.PERIODIC: GuardKind.NOT_PERIODIC, GuardKind.NOT_PERIODIC: GuardKind.PERIODIC,
            GuardKind.SYNC: GuardKind.NOT_SYNC, GuardKind.NOT_SYNC: GuardKind.SYNC}
    if guard.kind in flip:
        return replace(guard, kind=flip[guard.kind])
    if guard.kind is GuardKind.INVARIANT:
        return guard
    return _UNKNOWN


class GuardReader:
    """Classifies conditions of one loop (the loop decides which names vary per iteration)."""

    def __init__(self, loop: Loop, int_inits: dict[str, set[int | None]]) -> None:
        self.loop = loop
        self.int_inits = int_inits
        self.variant = loop.assigned_names()
        self.aliases: dict[str, list[Assignment]] = {}
        for assignment in loop.assignments:
            for name in assignment.names:
                self.aliases.setdefault(name, []).append(assignment)

    def guard(self, conds: tuple[Cond, ...], order: int | None = None) -> Guard:
        atoms = [self.atom(c.test, c.negated, order, 0) if c.test is not None else _UNKNOWN for c in conds]
        atoms = [a for a in atoms if a.kind is not GuardKind.INVARIANT]
        if not atoms:
            return Guard(GuardKind.ALWAYS)
        if len(atoms) == 1:
            return atoms[0]
        return _UNKNOWN

    def atom(self, test: cst.BaseExpression, negated: bool, order: int | None, depth: int) -> Guard:
        guard = self._positive(test, order, depth)
        return _negate(guard) if negated else guard

    def _positive(self, test: cst.BaseExpression, order: int | None, depth: int) -> Guard:
        if depth > 4:
            return _UNKNOWN
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return _negate(self._positive(test.expression, order, depth + 1))
        if isinstance(test, cst.BooleanOperation):
            return self._boolean(test, order, depth)
        name = dotted(test)
        if name is not None and name.endswith("sync_gradients"):
            return Guard(GuardKind.SYNC, test=test)
        alias = self._alias(name, order) if name else None
        if alias is not None:
            return self._positive(alias, order, depth + 1)
        modular = self._modular(test, order)
        if modular is not None:
            return modular
        if self._is_last(test):
            return Guard(GuardKind.LAST, test=test)
        if self._invariant(test):
            return _INVARIANT
        return _UNKNOWN

    def _boolean(self, test: cst.BooleanOperation, order: int | None, depth: int) -> Guard:
        left = self._positive(test.left, order, depth + 1)
        right = self._positive(test.right, order, depth + 1)
        inv = GuardKind.INVARIANT
        if isinstance(test.operator, cst.And):
            if left.kind is inv:
                return right
            if right.kind is inv:
                return left
            return _UNKNOWN
        for a, b in ((left, right), (right, left)):
            if a.kind is GuardKind.PERIODIC and b.kind is GuardKind.LAST:
                return replace(a, flush=True, test=test)
            if a.kind is GuardKind.PERIODIC:
                return replace(a, flush=None, test=test, phase=Phase.UNKNOWN)
        return _UNKNOWN

    def _alias(self, name: str, order: int | None) -> cst.BaseExpression | None:
        """``need_update = (i + 1) % N == 0`` earlier in the loop: the test means its value."""
        found = [a for a in self.aliases.get(name, []) if a.op == "=" and (order is None or a.order < order)]
        if len(found) == 1 and not isinstance(found[0].value, cst.Call) and dotted(found[0].value) != name:
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
        if not (isinstance(mod, cst.BinaryOperation) and isinstance(mod.operator, cst.Modulo)):
            return None
        index, offset = self._index(mod.left, order)
        if index is None:
            return None
        modulus = mod.right
        if int_value(modulus) == 1:
            return _UNKNOWN
        base = self._base(index, order)
        phase = Phase.UNKNOWN
        if base is not None and offset is not None:
            shift = base + offset
            target = int_value(compared)
            if target is None and _is_minus_one(compared, modulus):
                target = -1
            if target == 0:
                phase = {1: Phase.BOUNDARY, 0: Phase.START}.get(shift, Phase.OFF)
            elif target == -1:
                phase = {0: Phase.BOUNDARY, 1: Phase.START}.get(shift, Phase.OFF)
        guard = Guard(GuardKind.PERIODIC, modulus=modulus, index=index, phase=phase, test=test)
        return _negate(guard) if negated else guard

    def _index(self, expr: cst.BaseExpression, order: int | None) -> tuple[str | None, int | None]:
        """``i`` -> (i, 0); ``i + 1`` -> (i, 1); a name the loop does not vary -> (None, None)."""
        offset = 0
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
            k = int_value(expr.right)
            if k is None:
                # `epoch * len(loader) + i` and the like: periodic, but of unknown phase
                return (self._variant_name(expr), None)
            offset = k if isinstance(expr.operator, cst.Add) else -k
            expr = expr.left
        name = dotted(expr)
        if name is None or not self.varies(name):
            return (self._variant_name(expr), None)
        alias = self._alias(name, order)
        if alias is not None and dotted(alias) and self.varies(dotted(alias)):  # type: ignore[arg-type]
            return self._index(alias, order)[0], offset
        return name, offset

    def _variant_name(self, expr: cst.BaseExpression) -> str | None:
        names = sorted(n for n in names_in(expr) if self.varies(n))
        return names[0] if names else None

    def varies(self, name: str) -> bool:
        """Whether ``name`` (or the object it is an attribute of) is reassigned in the loop."""
        return name in self.variant or name.split(".", 1)[0] in self.variant

    def _base(self, index: str, order: int | None) -> int | None:
        """Value of ``index`` on the loop's first iteration, where the code makes it certain."""
        for assignment in self.aliases.get(index, []):
            if assignment.op == "for":
                return enumerate_start(assignment, index)
        increments = [a for a in self.aliases.get(index, []) if a.op == "AddAssign"]
        others = [a for a in self.aliases.get(index, []) if a.op not in ("AddAssign",)]
        if len(increments) != 1 or others or increments[0].conds or int_value(increments[0].value) != 1:
            return None
        inits = self.int_inits.get(last_part(index), set())
        if len(inits) != 1 or None in inits:
            return None
        init = next(iter(inits))
        assert init is not None
        before = order is not None and increments[0].order < order
        return init + 1 if before else init

    def _is_last(self, test: cst.BaseExpression) -> bool:
        name = dotted(test)
        if name is not None:
            short = last_part(name).lower()
            return any(w in short for w in ("last", "final", "end_of", "is_end"))
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            text = [test.left, test.comparisons[0].comparator]
            return any(isinstance(n, cst.Call) and func_name(n) == "len" for side in text for n in walk(side)) or any(
                "last" in (dotted(side) or "").lower() for side in text)
        return False

    def _invariant(self, test: cst.BaseExpression) -> bool:
        for node in walk(test):
            if isinstance(node, cst.Call):
                name = func_name(node)
                if name not in _PURE_CALLS:
                    return False
        for name in names_in(test):
            if self.varies(name):
                return False
            if name.startswith("self.") and not name.startswith(_CONFIG_ROOTS):
                return False
        return True


def _is_minus_one(expr: cst.BaseExpression, modulus: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)
            and int_value(expr.right) == 1 and same(expr.left, modulus))


def enumerate_start(assignment: Assignment, index: str) -> int | None:
    """``for i, x in enumerate(it, 1)`` -> 1; ``for i in range(a, b)`` -> a."""
    iterable = assignment.value
    if not isinstance(iterable, cst.Call):
        return None
    name = last_part(func_name(iterable) or "")
    args = positional(iterable)
    while name in ("tqdm", "track", "progress") and args and isinstance(args[0], cst.Call):
        iterable = args[0]  # progress-bar wrappers keep the wrapped iterator's values
        name, args = last_part(func_name(iterable) or ""), positional(iterable)
    if name == "enumerate" and assignment.names and assignment.names[0] == index:
        start = args[1] if len(args) > 1 else next(
            (a.value for a in iterable.args if a.keyword is not None and a.keyword.value == "start"), None)
        return 0 if start is None else int_value(start)
    if name in ("range", "trange") and assignment.names == (index,):
        return 0 if len(args) == 1 else int_value(args[0])
    return None


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
