"""Loop exits on a value the loop's counter never takes.

``if i == self.break_iter: break`` with ``self.break_iter = -1`` the only value the file gives it (a
debug cap left switched off), in ``for i, batch in enumerate(loader):``, never ends a pass: an
``enumerate`` or ``range`` index counts up from a start of 0 or more and is never negative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Loop
from loopcheck.model.guards import unwrap_iterable
from loopcheck.model.syntax import dotted, func_name, int_value, last_part, positional, target_names, walk
from loopcheck.model.values import option_defaults

if TYPE_CHECKING:
    from loopcheck.model import FileModel


def never_equal(test: cst.BaseExpression, loop: Loop, model: FileModel) -> bool:
    """``test`` is ``index == value`` (either way round), ``index`` the loop's own ``enumerate`` or
    ``range`` index counting up from 0 or more and not rebound in the loop, and ``value`` a negative
    number by every binding the file shows: a literal (``-1``), or a name or attribute the file only
    ever assigns one negative literal (``self.break_iter = -1``), or an option whose default is
    negative and that nothing assigns. A value the file binds in any other way (a parameter, an
    unpacking, ``+=``, a loop target) may be anything."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    index = _counter(loop)
    if index is None:
        return False
    for counter, value in (sides, sides[::-1]):
        if isinstance(counter, cst.Name) and counter.value == index and _negative(value, model):
            return True
    return False


def _counter(loop: Loop) -> str | None:
    """The loop's index where it is a non-negative count: ``for i, x in enumerate(loader)`` (also
    through a progress bar, or a name bound to one before the loop), ``for i in range(n)``."""
    if not loop.is_loop or not loop.assignments or loop.assignments[0].op != "for":
        return None
    target = loop.assignments[0]
    node = loop.node
    if not isinstance(node, cst.For):
        return None
    first = node.target.elements[0].value if isinstance(node.target, cst.Tuple) and node.target.elements \
        else node.target
    if not isinstance(first, cst.Name):
        return None
    index = first.value
    sources = [unwrap_iterable(s) for s in (target.value, *loop.iter_sources)]
    calls = [s for s in sources if isinstance(s, cst.Call) and last_part(func_name(s) or "") in ("enumerate", "range")]
    if not calls or not all(_from_zero_up(c, isinstance(node.target, cst.Tuple)) for c in calls):
        return None
    if _rebound(loop, index):
        return None
    return index


def _from_zero_up(call: cst.Call, unpacked: bool) -> bool:
    args = positional(call)
    if last_part(func_name(call) or "") == "enumerate":
        start = args[1] if len(args) > 1 else next(
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == "start"), None)
        value = 0 if start is None else int_value(start)
        return unpacked and value is not None and value >= 0
    if unpacked or not 1 <= len(args) <= 2:
        return False  # `range(a, b, -1)` counts down
    value = 0 if len(args) == 1 else int_value(args[0])
    return value is not None and value >= 0


def _rebound(loop: Loop, name: str) -> bool:
    """``name`` is bound in the loop's body (or a loop inside it) by anything but the loop itself."""
    stack = [loop]
    while stack:
        scope = stack.pop()
        if any(name in a.names and a is not loop.assignments[0] for a in scope.assignments):
            return True
        stack.extend(scope.loops)
    return False


def _negative(value: cst.BaseExpression, model: FileModel) -> bool:
    """``value`` is a negative number by every binding the file shows (see ``never_equal``): every
    assignment of a name ending alike gives a negative literal, and one of them is this name's, or
    none is and the name is an option whose default is negative (``args.break_iter`` is not
    ``self.break_iter``, though both end alike)."""
    number = _literal(value)
    if number is not None:
        return number < 0
    name = dotted(value)
    if name is None:
        return False
    short = last_part(name)
    if _bound_otherwise(model, short):
        return False
    assigned = [(dotted(target), node.value) for node in walk(model.module, into_functions=True)
                if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None
                for target in ([t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target])
                if last_part(dotted(target) or "") == short]
    if not all((number := _literal(v)) is not None and number < 0 for _, v in assigned):
        return False  # `trainer.break_iter = 10` elsewhere may be the same attribute
    if any(target == name for target, _ in assigned):
        return True
    # no assignment: an option's default (`parser.add_argument("--break_iter", default=-1)`), read as `args.break_iter`
    defaults = [d for option, d in option_defaults(model.index) if option == short]
    return "." in name and len(defaults) == 1 and defaults[0] is not None \
        and (number := _literal(defaults[0])) is not None and number < 0


def _literal(expr: cst.BaseExpression) -> float | None:
    """The value of a number literal, signed (``-1``, ``-1.0``), else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _literal(expr.expression)
        return -inner if inner is not None else None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    return None


def _bound_otherwise(model: FileModel, short: str) -> bool:
    """The file binds ``short`` (a name or an attribute's last part) other than by a plain one-target
    assignment: ``+=``, an unpacking, a loop or ``with`` target, a parameter, ``setattr``, a walrus."""
    if short in model.index.incremented:
        return True
    for node in walk(model.module, into_functions=True):
        if isinstance(node, cst.Assign):
            if any(not isinstance(t.target, (cst.Name, cst.Attribute)) and short in
                   {last_part(n) for n in target_names(t.target)} for t in node.targets):
                return True
        elif isinstance(node, (cst.For, cst.CompFor)):
            if short in {last_part(n) for n in target_names(node.target)}:
                return True
        elif isinstance(node, cst.AsName):
            if short in {last_part(n) for n in target_names(node.name)}:  # type: ignore[arg-type]
                return True
        elif isinstance(node, cst.NamedExpr):
            if dotted(node.target) == short:
                return True
        elif isinstance(node, cst.Param):
            if node.name.value == short:
                return True
        elif isinstance(node, cst.Call) and func_name(node) == "setattr":
            args = positional(node)
            if len(args) > 1 and isinstance(args[1], cst.SimpleString) and args[1].evaluated_value == short:
                return True
    return False
