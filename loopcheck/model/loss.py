"""How the loss handed to backward was scaled: divided, multiplied, or passed on raw.

Follows the loss variable back through the assignments of its loop (``loss = loss / N``,
``loss /= N``, ``loss = criterion(out, y)``); anything it cannot follow is ``UNKNOWN``.
"""

from __future__ import annotations

import enum

import libcst as cst

from loopcheck.model.events import Loop
from loopcheck.model.syntax import dotted, func_name, method, names_in, walk


class Scaling(enum.Enum):
    DIVIDED = "divided"  # by N, a count, a token total: normalised
    MULTIPLIED = "multiplied"  # an explicit scale (yolov5's `* batch_size`): the author decided
    RAW = "raw"  # straight from a criterion or model output
    UNKNOWN = "unknown"


_DIV = (cst.Divide, cst.FloorDivide)


def loss_scaling(expr: cst.BaseExpression, loop: Loop, order: int, known_functions: set[str],
                 accumulation_names: set[str], depth: int = 0) -> Scaling:
    if depth > 6:
        return Scaling.UNKNOWN
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, _DIV):
            return Scaling.DIVIDED
        if isinstance(expr.operator, cst.Multiply):
            return Scaling.MULTIPLIED
        left = loss_scaling(expr.left, loop, order, known_functions, accumulation_names, depth + 1)
        right = loss_scaling(expr.right, loop, order, known_functions, accumulation_names, depth + 1)
        return left if left == right else Scaling.UNKNOWN
    if isinstance(expr, cst.Call):
        called = method(expr)
        if called is not None and called[1] in ("mean", "sum", "float", "to", "squeeze", "contiguous", "clone"):
            if dotted(called[0]) is not None or isinstance(called[0], (cst.Subscript, cst.Attribute)):
                return loss_scaling(called[0], loop, order, known_functions, accumulation_names, depth + 1)
        name = func_name(expr) or ""
        if name.split(".", 1)[0] in known_functions or name.startswith("self."):
            return Scaling.UNKNOWN  # a helper of this file, which may normalise inside
        if any(n in accumulation_names or n.split(".")[-1] in accumulation_names
               for arg in expr.args for n in names_in(arg.value)):
            return Scaling.UNKNOWN  # it is told N: it may divide by it
        return Scaling.RAW
    if isinstance(expr, cst.Subscript):
        return loss_scaling(expr.value, loop, order, known_functions, accumulation_names, depth + 1)
    name = dotted(expr)
    if name is None:
        return Scaling.UNKNOWN
    assignments = [a for a in loop.assignments_before(name, order) if a.op != "for"]
    if not assignments:
        if isinstance(expr, cst.Attribute):  # `outputs.loss`: follow `outputs`
            return loss_scaling(expr.value, loop, order, known_functions, accumulation_names, depth + 1)
        return Scaling.UNKNOWN
    for a in assignments:
        if a.op in ("DivideAssign", "FloorDivideAssign"):
            return Scaling.DIVIDED
        if a.op == "MultiplyAssign":
            return Scaling.MULTIPLIED
        if a.op not in ("=",):
            return Scaling.UNKNOWN  # `loss += ...`: summed over something we do not follow
    last = assignments[-1]
    if any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, _DIV) for n in walk(last.value)):
        return Scaling.DIVIDED
    return loss_scaling(last.value, loop, last.order, known_functions, accumulation_names, depth + 1)

