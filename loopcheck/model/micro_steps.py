"""Loops that run a fixed count of micro-steps, and the tests that pick their last one.

``for i in range(N):`` or ``for i, chunk in enumerate(chunks):`` (N is ``len(chunks)``) runs its body
N times with ``i`` going 0 .. N-1. A test of ``i`` against that same N (``i == N - 1``, ``i + 1 ==
N``) holds on its last iteration and nowhere else: within the loop it is the boundary ``(i + 1) % N
== 0`` of a window of exactly N micro-steps.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.events import Loop
from loopcheck.model.syntax import dotted, func_name, int_value, last_part, positional, same


def counted(loop: Loop) -> tuple[str, cst.BaseExpression] | None:
    """The index and the count N of ``for i in range(N)`` / ``for i, x in enumerate(xs)`` (N =
    ``len(xs)``), where the loop itself never reassigns the index."""
    it, target = loop.iter, loop.target
    if not isinstance(it, cst.Call) or target is None:
        return None
    name, args = last_part(func_name(it) or ""), positional(it)
    if name == "range" and len(args) == 1 and len(it.args) == 1 and isinstance(target, cst.Name):
        index, count = target.value, args[0]
    elif name == "enumerate" and len(args) == 1 and len(it.args) == 1 and isinstance(target, cst.Tuple) \
            and len(target.elements) == 2 and isinstance(target.elements[0].value, cst.Name):
        index = target.elements[0].value.value
        count = cst.Call(cst.Name("len"), [cst.Arg(args[0])])
    else:
        return None
    if any(index in a.names and a.node is not loop.node for a in loop.assignments):
        return None
    return index, count


def last_of(test: cst.BaseExpression, index: str, count: cst.BaseExpression) -> bool | None:
    """True where ``test`` holds on the last of ``count`` iterations only (``i == N - 1``, ``i + 1 ==
    N``, ``i >= N - 1``), False where it holds on every iteration but that one (``i != N - 1``, ``i <
    N - 1``, ``i + 1 < N``); None where it is neither."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:  # type: ignore[attr-defined]
        return None
    left, op, right = test.left, type(test.comparisons[0].operator), test.comparisons[0].comparator
    if dotted(right) == index or isinstance(right, cst.BinaryOperation) and dotted(right.left) == index:
        # `N - 1 == i`: the index on the right
        left, right = right, left
        op = {cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThan: cst.LessThan}.get(op, op)
    offset = 0
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Add) and int_value(left.right) == 1:
        left, offset = left.left, 1
    if dotted(left) != index:
        return None
    last = (offset == 0 and isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Subtract)
            and int_value(right.right) == 1 and same(right.left, count)) or (offset == 1 and same(right, count))
    if not last:
        return None
    return {cst.Equal: True, cst.GreaterThanEqual: True, cst.NotEqual: False, cst.LessThan: False}.get(op)
