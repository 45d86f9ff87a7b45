"""Overrides of Lightning's ``LightningModule.optimizer_step`` hook that step more than once.

Under automatic optimization Lightning calls ``optimizer_step(epoch, batch_idx, optimizer,
optimizer_closure)`` once per batch, and the closure runs ``training_step``, ``zero_grad`` and
``backward``. The hook's default body (Lightning 2.x ``core/module.py``, also 1.x) is one line,
``optimizer.step(closure=optimizer_closure)``. An override that steps with the closure itself
(``self.optimizer.step(optimizer_closure)``) and then calls ``super().optimizer_step(...)`` with it
steps twice per batch, running the forward and backward twice (measured: 4 batches, 8 steps, 8
``training_step`` calls). Only a straight run of the hook's own statements counts: steps in
branches of a test, after an early ``return``, or in a module that turns automatic optimization
off (the hook is then never called) are left alone.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.syntax import dotted, last_part, lines, method, walk


def restepped(module: cst.Module) -> list[tuple[cst.Call, cst.CSTNode, cst.Call]]:
    """(the second step, its statement, the first step) for each ``optimizer_step`` override of a
    LightningModule subclass that steps twice with the hook's closure."""
    found: list[tuple[cst.Call, cst.CSTNode, cst.Call]] = []
    for cls in _classes(module.body):
        if not any(last_part(dotted(b.value) or "") == "LightningModule" for b in cls.bases) \
                or _manual_optimization(cls):
            continue
        for fn in lines(cls.body):
            if type(fn) is cst.FunctionDef and fn.name.value == "optimizer_step":
                found.extend(_second_steps(fn))
    return found


def _classes(body: object) -> list[cst.ClassDef]:
    return [stmt for stmt in body if type(stmt) is cst.ClassDef]  # type: ignore[attr-defined]


def _manual_optimization(cls: cst.ClassDef) -> bool:
    """``self.automatic_optimization = False`` (or any assignment to it): Lightning does not call
    ``optimizer_step`` for manual optimization."""
    return any(type(node) is cst.Attribute and node.attr.value == "automatic_optimization" for node in walk(cls))


def _second_steps(fn: cst.FunctionDef) -> list[tuple[cst.Call, cst.CSTNode, cst.Call]]:
    closure = next((p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]
                    if "closure" in p.name.value), None)
    if closure is None:
        return []
    steps: list[tuple[cst.Call, cst.CSTNode]] = []
    todo = list(lines(fn.body))
    while todo:
        stmt = todo.pop(0)
        kind = type(stmt)
        if kind is cst.With:
            todo[:0] = lines(stmt.body)  # type: ignore[attr-defined]
            continue
        if kind is not cst.SimpleStatementLine and kind is not cst.SimpleStatementSuite:
            if any(type(n) in (cst.Return, cst.Raise) for n in walk(stmt)):
                break  # an exit in a branch: what follows may not run
            continue
        for small in stmt.body:  # type: ignore[attr-defined]
            if type(small) in (cst.Return, cst.Raise):
                todo = []
                break
            if type(small) is cst.Expr and type(small.value) is cst.Call and _steps_with(small.value, closure):
                steps.append((small.value, stmt))
    return [(call, stmt, steps[0][0]) for call, stmt in steps[1:]]


def _steps_with(call: cst.Call, closure: str) -> bool:
    """``x.step(closure)`` / ``x.step(closure=closure)``, or ``super().optimizer_step(..., closure)``
    (whose default body steps with it)."""
    called = method(call)
    if called is None or not any(type(a.value) is cst.Name and a.value.value == closure for a in call.args):
        return False
    recv, name = called
    if name == "step":
        return True
    return name == "optimizer_step" and type(recv) is cst.Call and type(recv.func) is cst.Name \
        and recv.func.value == "super"
