"""Methods of the file's own classes that add what they are handed into their object: a meter.

``train_loss.update(loss)`` with ``def update(self, val): self.sum += val`` in a class of the same
file keeps ``loss`` in ``train_loss`` across calls, as ``history.append(loss)`` keeps it in a list
(a class of another project module is read from its facts, ``loopcheck.project.flow.keeps``).
Only a sum or a list that grows with every call counts: ``self.sum += val``, ``self.sum =
self.sum + val * n``, ``self.values.append(val)``, also through operations that keep the graph
(``val.cpu()``, horovod's differentiable ``hvd.allreduce(val)``); ``self.val = val`` holds one call's
value, not all of them. A parameter the method rebinds (``val = val.item()``), or one read under
``torch.no_grad()``, or through ``.item()``/``.detach()`` is not kept.
"""

from __future__ import annotations

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, method, source, walk
from loopcheck.patterns import Pattern

# Tensor methods whose result stays attached to the graph of their receiver
_KEEPING = {"cpu", "cuda", "to", "float", "double", "half", "mean", "sum", "clone", "view", "reshape", "squeeze",
            "unsqueeze", "contiguous", "flatten"}
# horovod's collectives are autograd functions: what they return carries the graph of their input
DIFFERENTIABLE_COLLECTIVE = Pattern(r"^(?:hvd|horovod(?:\.torch)?)\.(?:allreduce|allgather|grouped_allreduce)$")
_PLAIN_TYPES = {"int", "float", "bool", "str"}
_NO_GRAD = Pattern(r"\b(no_grad|inference_mode)\b")
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)

# what an argument computed this way holds is a number, never a graph (`loss.item()`, `x.size(0)`,
# `time.time() - end`): no need to keep an event for it
_NUMBER_METHODS = {"item", "tolist", "size", "numel", "dim", "detach", "numpy"}
_NUMBER_FUNCTIONS = {"float", "int", "len", "round", "bool", "time.time", "time.perf_counter", "time.monotonic"}


def is_number(expr: cst.BaseExpression) -> bool:
    """``loss.item()``, ``images.size(0)``, ``time.time() - end``, ``3``: no tensor that carries a graph."""
    kind = type(expr)
    if kind in (cst.Integer, cst.Float, cst.SimpleString):
        return True
    if kind is cst.BinaryOperation:
        return is_number(expr.left) and is_number(expr.right)  # type: ignore[attr-defined]
    if kind is cst.Call:
        called = method(expr)  # type: ignore[arg-type]
        return called is not None and called[1] in _NUMBER_METHODS or func_name(expr) in _NUMBER_FUNCTIONS  # type: ignore[arg-type]
    return False


def kept_arguments(fn: cst.FunctionDef) -> tuple[int, ...]:
    """Positions (after ``self``) of the arguments ``fn`` adds into a sum or a list of its object."""
    params = fn.params.params
    if not params or params[0].name.value != "self":
        return ()
    if any(_NO_GRAD.search(source(d.decorator)) for d in fn.decorators):
        return ()
    index = {p.name.value: i for i, p in enumerate(params[1:])
             if not (p.annotation is not None and dotted(p.annotation.annotation) in _PLAIN_TYPES)}
    if not index:
        return ()
    added: list[cst.BaseExpression] = []
    rebound: set[str] = set()
    for node in walk(fn.body):
        kind = type(node)
        if kind is cst.With and any(_NO_GRAD.search(source(item.item)) for item in node.items):  # type: ignore[attr-defined]
            return ()
        if kind is cst.AugAssign:
            target = node.target  # type: ignore[attr-defined]
            if type(target) is cst.Name:
                rebound.add(target.value)
            elif type(node.operator) is cst.AddAssign and _on_self(target):  # type: ignore[attr-defined]
                added.append(node.value)  # type: ignore[attr-defined]
        elif kind is cst.Assign:
            for t in node.targets:  # type: ignore[attr-defined]
                rebound |= {n.value for n in walk(t.target) if type(n) is cst.Name} if not _on_self(t.target) else set()
            value = node.value  # type: ignore[attr-defined]
            if len(node.targets) == 1 and _on_self(target := node.targets[0].target) \
                    and type(value) is cst.BinaryOperation and type(value.operator) is cst.Add:  # type: ignore[attr-defined]
                # `self.sum = self.sum + val * n`: the sum it held, plus the argument
                terms = _terms(value)
                held = [t for t in terms if source(t) == source(target)]
                if held:
                    added.extend(t for t in terms if t not in held)
        elif kind is cst.AnnAssign or kind is cst.For:
            rebound |= {n.value for n in walk(node.target) if type(n) is cst.Name}  # type: ignore[attr-defined]
        elif kind is cst.Call and (called := method(node)) is not None and called[1] == "append" \
                and _on_self(called[0]) and len(node.args) == 1:  # type: ignore[attr-defined]
            added.append(node.args[0].value)  # type: ignore[attr-defined]
    kept = {index[n] for value in added for n in _operands(value) if n in index and n not in rebound}
    return tuple(sorted(kept))


def _on_self(target: cst.BaseExpression) -> bool:
    while type(target) is cst.Subscript:
        target = target.value  # type: ignore[attr-defined]
    return type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self"  # type: ignore[attr-defined]


def _terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of a sum: ``a + b + c`` -> [a, b, c]."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:  # type: ignore[attr-defined]
        return [*_terms(expr.left), *_terms(expr.right)]  # type: ignore[attr-defined]
    return [expr]


def _operands(expr: cst.BaseExpression) -> list[str]:
    """The parameters ``expr`` carries the graph of: plain arithmetic of names, methods that keep the
    graph (``val.cpu()``) and horovod's collectives (``hvd.allreduce(val, name=...)``)."""
    kind = type(expr)
    if kind is cst.Name:
        return [expr.value]  # type: ignore[attr-defined]
    if kind is cst.BinaryOperation and isinstance(expr.operator, _ARITHMETIC):  # type: ignore[attr-defined]
        return [*_operands(expr.left), *_operands(expr.right)]  # type: ignore[attr-defined]
    if kind is cst.UnaryOperation:
        return _operands(expr.expression)  # type: ignore[attr-defined]
    if kind is cst.Call:
        called = method(expr)  # type: ignore[arg-type]
        if called is not None and called[1] in _KEEPING:
            return _operands(called[0])
        if DIFFERENTIABLE_COLLECTIVE.match(func_name(expr) or "") and expr.args and expr.args[0].keyword is None:  # type: ignore[attr-defined]
            return _operands(expr.args[0].value)  # type: ignore[attr-defined]
    return []
