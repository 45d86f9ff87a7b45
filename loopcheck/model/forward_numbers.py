"""Elements of a same-file model's ``forward`` return that are plain numbers, not tensors.

An actor-critic's ``forward`` often hands back the sampled action as a number for the
environment beside the tensors the loss is built from (``return action.numpy()[0], v, log_prob``):
``action, value, log_prob = agent(state)`` then binds ``action`` to a NumPy value that holds no
graph (``.numpy()`` refuses a tensor that requires grad), although it comes out of the trained model.
The project-wide reading of another module's ``forward`` is ``loopcheck.project.facts._numbers``;
this is its counterpart for a class of the same file.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.roles import Roles
from loopcheck.model.syntax import dotted, func_name, last_part, method, target_names, walk

# `.numpy()` / `.tolist()` (indexed or not), `.item()`, and the builtins that make a number
_CONVERTING = {"item", "numpy", "tolist"}
_NUMBER_CALLS = {"float", "int", "len", "round"}


def forward_returns_number(module: cst.Module, roles: Roles, call: cst.Call, position: int) -> bool:
    """``call`` runs the ``forward`` of a class this file defines (``agent = ActorCritic(...)``, then
    ``agent(state)``), and element ``position`` of every tuple that ``forward`` returns is a plain
    number (``action.numpy()[0]``, ``loss.item()``, or a name only ever bound to one)."""
    name = dotted(call.func)
    if name is None:
        return False
    classes = {last_part(func_name(c) or "") for c in roles.constructed.get(last_part(name), [])}
    if len(classes) != 1:
        return False
    forward = _forward(module, classes.pop())
    if forward is None:
        return False
    bound: dict[str, list[cst.BaseExpression | None]] = {}
    returns: list[cst.BaseExpression | None] = []
    for node in walk(forward.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                for bound_name in target_names(target.target):
                    single = dotted(target.target) == bound_name
                    bound.setdefault(bound_name, []).append(node.value if single else None)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            for bound_name in target_names(node.target):
                bound.setdefault(bound_name, []).append(None)
        elif isinstance(node, (cst.For, cst.CompFor)):
            for bound_name in target_names(node.target):
                bound.setdefault(bound_name, []).append(None)
        elif isinstance(node, cst.Return):
            returns.append(node.value)
    if not returns:
        return False
    for value in returns:
        if not isinstance(value, cst.Tuple) or position >= len(value.elements):
            return False
        element = value.elements[position]
        if isinstance(element, cst.StarredElement):
            return False
        returned = element.value
        if isinstance(returned, cst.Name) and returned.value in bound:
            if not all(v is not None and _number(v) for v in bound[returned.value]):
                return False
        elif not _number(returned):
            return False
    return True


def _forward(module: cst.Module, class_name: str) -> cst.FunctionDef | None:
    """The ``forward`` method of the top-level class ``class_name`` of the module."""
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == class_name \
                and isinstance(stmt.body, cst.IndentedBlock):
            for member in stmt.body.body:
                if isinstance(member, cst.FunctionDef) and member.name.value == "forward":
                    return member
    return None


def _number(expr: cst.BaseExpression) -> bool:
    """A number literal, ``x.item()``, ``x.numpy()`` / ``x.tolist()`` (indexed or not), ``float(x)``."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Subscript):
        expr = expr.value
        called = method(expr) if isinstance(expr, cst.Call) else None
        return called is not None and called[1] in ("numpy", "tolist") and not expr.args  # type: ignore[attr-defined]
    if isinstance(expr, cst.Call):
        called = method(expr)
        if called is not None:
            return called[1] in _CONVERTING and not expr.args
        return func_name(expr) in _NUMBER_CALLS
    return False
