"""Which values of a training loop carry an autograd graph, read off the training-loop model.

Certain only for the loss that is back-propagated (the very binding handed to ``backward``) and
for the outputs of the trained model called directly (``logits = model(x)``); anything passed
through an unknown function is unknown, and ``.item()``, ``.detach()``, ``float()`` or a value
computed under ``torch.no_grad()`` carry none.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module("for x in loader:\\n    loss = f(x)\\n    loss.backward()\\n"))
>>> GraphReader(m, m.training_loops[0]).carries(cst.parse_expression("loss.item()"), 99, ())
False
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Kind
from loopcheck.model.guards import exclusive
from loopcheck.model.optimizers import parameter_owners
from loopcheck.model.roles import Role, role_of_constructor
from loopcheck.model.syntax import dotted, func_name, method, names_in, source, target_names
from loopcheck.model.training import TrainingLoop

if TYPE_CHECKING:
    from loopcheck.model import FileModel

_DETACHING = {"item", "detach", "detach_", "tolist", "numpy", "argmax", "argmin", "eq", "ne", "gt", "lt",
              "long", "int", "bool"}
_KEEPING = {"mean", "sum", "clone", "float", "double", "half", "bfloat16", "to", "cpu", "cuda", "view", "reshape",
            "squeeze", "unsqueeze", "contiguous", "flatten"}
_PLAIN = {"float", "int", "bool", "round", "len", "str"}
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)


def trained_modules(model: FileModel) -> set[str]:
    """Names of modules this file trains: their ``.parameters()`` go to an optimizer or a
    clipping call, or ``.train()`` is called on them."""
    found = {e.receiver for e in model.events(Kind.TRAIN_MODE) if e.receiver}
    for call in model.index.calls:
        name = func_name(call) or ""
        if role_of_constructor(name) is Role.OPTIMIZER or name.endswith(("clip_grad_norm_", "clip_grad_value_")):
            found |= parameter_owners(call)
    return {module_name(n) for n in found}


_MOVES = re.compile(r"\.(to|cuda|cpu|float|half|double|bfloat16|eval|train)\([^()]*\)$|\.module$")


def module_name(name: str) -> str:
    """The module behind a receiver: ``model`` for ``model.module`` or ``model.to(device)``."""
    while (stripped := _MOVES.sub("", name)) != name:
        name = stripped
    return name


def frozen_modules(model: FileModel) -> set[str]:
    """Modules the file freezes on purpose: ``m.requires_grad_(False)`` (or with a flag: frozen in
    some configuration), ``m.eval().requires_grad_(False)``, ``for p in m.parameters(): p.requires_grad = False``."""
    found: set[str] = set()
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] != "requires_grad_":
            continue
        args = [a.value for a in call.args]
        if args and isinstance(args[0], cst.Name) and args[0].value == "True" or not args:
            continue
        name = dotted(called[0]) or (source(called[0]) if isinstance(called[0], cst.Call) else None)
        if name:
            found.add(module_name(name))
    # `for p in m.parameters(): p.requires_grad = False` (lifted into its parent: it runs no backward)
    for loop in [*model.scopes, *model.loops()]:
        for assignment in loop.assignments:
            node = assignment.in_loop or (loop.node if loop.is_loop else None)
            if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call):
                continue
            called, targets = method(node.iter), target_names(node.target)
            if called is None or called[1] not in ("parameters", "named_parameters"):
                continue
            value = assignment.value
            if (assignment.names and assignment.names[0] in {f"{t}.requires_grad" for t in targets}
                    and isinstance(value, cst.Name) and value.value == "False" and dotted(called[0])):
                found.add(module_name(dotted(called[0])))  # type: ignore[arg-type]
    return found


def backpropagated_names(model: FileModel) -> set[str]:
    """Every name a backward pass of the file reads, directly or through the assignments that
    built its loss (``torch.stack(losses).mean().backward()`` reads ``losses``)."""
    values: dict[str, list[cst.BaseExpression]] = {}
    for loop in [*model.scopes, *model.loops()]:
        for assignment in loop.assignments:
            for name in assignment.names:
                values.setdefault(name, []).append(assignment.value)
    found: set[str] = set()
    todo = [n for b in model.events(Kind.BACKWARD) if b.loss is not None for n in names_in(b.loss)]
    while todo and len(found) < 200:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        todo.extend(n for value in values.get(name, []) for n in names_in(value))
    return found


class GraphReader:
    """Answers "does this expression hold an autograd graph?" inside one training loop."""

    def __init__(self, model: FileModel, training: TrainingLoop) -> None:
        self.loop = training.loop
        self.modules = trained_modules(model)
        self.project = model.project
        self.roles = model.roles
        # the bindings handed to backward: (name, the assignment live at the backward)
        self.backpropagated: list[tuple[str, Assignment | None]] = []
        for backward in training.backwards:
            for name in _loss_names(backward.loss):
                self.backpropagated.append((name, self.binding(name, backward.order, backward.conds)))

    def binding(self, name: str, order: int, conds: tuple[Cond, ...]) -> Assignment | None:
        """The latest assignment of ``name`` in the loop before ``order`` that can run with ``conds``."""
        found = [a for a in self.loop.assignments
                 if name in a.names and a.order < order and not exclusive(a.conds, conds)]
        return max(found, key=lambda a: a.order) if found else None

    def is_backpropagated(self, name: str) -> bool:
        return any(n == name for n, _ in self.backpropagated)

    def carries(self, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...], depth: int = 0) -> bool | None:
        """True: certainly a graph; False: certainly none; None: unknown."""
        if depth > 6:
            return None
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return False
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("data", "grad", "shape"):
            return False  # `loss.data[0]`, `p.grad`: no graph
        if isinstance(expr, (cst.Name, cst.Attribute)) and dotted(expr) is not None:
            return self._name(dotted(expr), expr, order, conds, depth)  # type: ignore[arg-type]
        if isinstance(expr, cst.Attribute):
            return self.carries(expr.value, order, conds, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.carries(expr.value, order, conds, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITHMETIC):
            sides = [self.carries(expr.left, order, conds, depth + 1),
                     self.carries(expr.right, order, conds, depth + 1)]
            return True if True in sides else (False if sides == [False, False] else None)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
            values = [e.value for e in expr.elements]  # type: ignore[union-attr]
            found = [self.carries(v, order, conds, depth + 1) for v in values if v is not None]
            return True if True in found else None
        if isinstance(expr, cst.Call):
            return self._call(expr, order, conds, depth)
        return None

    def _call(self, call: cst.Call, order: int, conds: tuple[Cond, ...], depth: int) -> bool | None:
        called = method(call)
        if called is not None:
            if called[1] in _DETACHING:
                return False
            if called[1] in _KEEPING:
                return self.carries(called[0], order, conds, depth + 1)
        name = func_name(call)
        if name in _PLAIN:
            return False
        if name is not None and module_name(name) in self.modules:
            return True  # the trained model's own forward
        imported = self.project.summary(call, self.roles) if self.project is not None else None
        if imported is not None and imported.facts.returns_graph and any(
                self.carries(a.value, order, conds, depth + 1) or module_name(dotted(a.value) or "") in self.modules
                for a in call.args):
            return True  # a loss function of another module, handed the model or its outputs
        return None

    def _name(self, name: str, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...],
              depth: int) -> bool | None:
        assignment = self.binding(name, order, conds)
        if assignment is None:
            if isinstance(expr, cst.Attribute):  # `outputs.loss`: follow `outputs`
                return self.carries(expr.value, order, conds, depth + 1)
            return None
        if assignment.op == "for" or any(c.kind == "no_grad" for c in assignment.contexts):
            return False if assignment.op != "for" else None
        if any(n == name and a is assignment for n, a in self.backpropagated):
            return True
        if assignment.op != "=" or len(assignment.names) != 1:
            # `logits, loss = model(x, y)`: each element of the model's output carries the graph
            if assignment.op == "=" and isinstance(assignment.value, cst.Call):
                return True if self._call(assignment.value, assignment.order, assignment.conds, depth) else None
            return None
        return self.carries(assignment.value, assignment.order, assignment.conds, depth + 1)


def _loss_names(loss: cst.BaseExpression | None) -> list[str]:
    """``loss`` for ``loss``, ``loss / N``, ``loss.mean()``: the names whose graph backward runs."""
    if loss is None:
        return []
    name = dotted(loss)
    if name is not None:
        return [name]
    if isinstance(loss, cst.BinaryOperation):
        return _loss_names(loss.left) + _loss_names(loss.right)
    if isinstance(loss, cst.Call):
        called = method(loss)
        if called is not None and called[1] in _KEEPING:
            return _loss_names(called[0])
    return []
