"""What the file itself says a name's value is: literals, single assignments, argparse defaults.

``numeric(args.lr * 64 / 256)`` is 2.5e-4 when the file has ``parser.add_argument("--lr",
default=1e-3)``; anything the file does not pin down is ``None``, and rules stay silent on it.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.index import Index
from loopcheck.model.roles import Role, role_of_constructor
from loopcheck.model.syntax import dotted, func_name, keyword, last_part, method, names_in, positional

_MAX_DEPTH = 4


def argparse_defaults(index: Index) -> dict[str, cst.BaseExpression]:
    """``--batch-size`` / ``--batch_size`` with ``default=64`` -> {"batch_size": 64}."""
    defaults: dict[str, cst.BaseExpression] = {}
    for call in index.calls:
        called = method(call)
        if called is None or called[1] != "add_argument":
            continue
        default = keyword(call, "default")
        flags = [a for a in positional(call) if isinstance(a, cst.SimpleString)]
        if default is None or not flags:
            continue
        name = flags[-1].evaluated_value
        if isinstance(name, str):
            defaults[name.lstrip("-").replace("-", "_")] = default
    return defaults


def definitions(name: str, index: Index) -> list[cst.BaseExpression]:
    """Every value the file gives ``name`` (its last part): assignments, or else an argparse default."""
    short = last_part(name)
    found = index.values.get(short, [])
    if found:
        return found
    default = argparse_defaults(index).get(short)
    return [default] if default is not None else []


def numeric(expr: cst.BaseExpression, index: Index, depth: int = 0) -> float | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = numeric(expr.expression, index, depth + 1)
        return -inner if inner is not None else None
    if isinstance(expr, cst.BinaryOperation):
        left, right = numeric(expr.left, index, depth + 1), numeric(expr.right, index, depth + 1)
        if left is None or right is None:
            return None
        op = expr.operator
        if isinstance(op, cst.Multiply):
            return left * right
        if isinstance(op, cst.Divide) and right:
            return left / right
        if isinstance(op, cst.FloorDivide) and right:
            return float(left // right)
        if isinstance(op, cst.Add):
            return left + right
        if isinstance(op, cst.Subtract):
            return left - right
        if isinstance(op, cst.Power):
            return float(left ** right)
        return None
    name = dotted(expr)
    if name is not None:
        values = definitions(name, index)
        numbers = {numeric(v, index, depth + 1) for v in values}
        return numbers.pop() if len(numbers) == 1 else None
    return None


def expanded_names(expr: cst.BaseExpression, index: Index, depth: int = 0) -> set[str]:
    """The names ``expr`` reads, following names the file assigns exactly once."""
    found: set[str] = set()
    for name in names_in(expr):
        found.add(name)
        values = index.values.get(last_part(name), [])
        if depth < _MAX_DEPTH and len(values) == 1:
            found |= expanded_names(values[0], index, depth + 1)
    return found


def optimizer_lr_expressions(index: Index) -> list[tuple[cst.BaseExpression, cst.Call]]:
    """The ``lr=`` (or second positional) argument of each optimizer the file constructs."""
    found = []
    for calls in index.roles.constructed.values():
        for call in calls:
            if role_of_constructor(func_name(call) or "") is not Role.OPTIMIZER:
                continue
            lr = keyword(call, "lr")
            args = positional(call)
            if lr is None and len(args) > 1:
                lr = args[1]
            if lr is not None:
                found.append((lr, call))
    return found


def optimizer_lrs(index: Index) -> list[tuple[cst.BaseExpression, float]]:
    """The ``lr=`` of each optimizer the file constructs, where the file pins its value down."""
    found = []
    for lr, _ in optimizer_lr_expressions(index):
        value = numeric(lr, index)
        if value is not None:
            found.append((lr, value))
    return found
