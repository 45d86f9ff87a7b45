"""How many times a back-propagated loss is divided by the accumulation count on its way to ``backward``.

``loss = loss / N`` followed by ``(loss / N).backward()`` divides twice; so does ``loss / N`` handed to
``accelerator.backward`` of an ``Accelerator(gradient_accumulation_steps=N)``, which divides once more
itself. Only a straight data flow is read: each assignment followed must run whenever the backward
does (no condition of its own), and anything else along the way (a call, a sum, another operator)
ends the count there.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module("for x in loader:\\n    loss = f(x) / N\\n    (loss / N).backward()\\n"))
>>> b = m.training_loops[0].backwards[0]
>>> divisions(b.loss, b.loop, b.order, b.conds, {"N"})
2
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.events import Cond, Loop
from loopcheck.model.syntax import dotted, func_name, last_part


def divisions(expr: cst.BaseExpression, loop: Loop | None, order: int, conds: tuple[Cond, ...],
              counts: set[str], depth: int = 0) -> int | None:
    """The divisions of ``expr`` by a name whose last part is in ``counts`` (``N``, ``args.accum_steps``,
    ``float(self.grad_accum_steps)``), following the assignments of ``loop`` that run before ``order``
    under no condition but ``conds``; None where an assignment followed is conditional or lifted."""
    if depth > 8 or loop is None:
        return None
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Divide) and _is_count(expr.right, counts):
            inner = divisions(expr.left, loop, order, conds, counts, depth + 1)
            return None if inner is None else inner + 1
        return 0
    name = dotted(expr)
    if name is None:
        return 0
    assignments = [a for a in loop.assignments_before(name, order) if a.op != "for"]
    if not assignments:
        return 0
    last = assignments[-1]
    if last.in_loop is not None or last.lifted or any(c not in conds for c in last.conds):
        return None
    if last.op == "DivideAssign":
        if not _is_count(last.value, counts):
            return 0
        inner = divisions(expr, loop, last.order, conds, counts, depth + 1)
        return None if inner is None else inner + 1
    if last.op == "=" and len(last.names) == 1:
        return divisions(last.value, loop, last.order, conds, counts, depth + 1)
    return 0


def _is_count(expr: cst.BaseExpression, counts: set[str]) -> bool:
    if isinstance(expr, cst.Call) and func_name(expr) in ("float", "int") and len(expr.args) == 1:
        expr = expr.args[0].value
    name = dotted(expr)
    return name is not None and last_part(name) in counts
