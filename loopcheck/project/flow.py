"""Where a function's argument goes: into its return through differentiable tensor operations
(``alignments.max(dim=1)[0].mean()``), or into its object's state (``self.avg[name] = ... + value``).

A caller whose argument holds an autograd graph then gets a graph back, or leaves it kept by the
object across calls.
"""

from __future__ import annotations

import ast
import re

from loopcheck.patterns import Pattern
from loopcheck.project.walk import walk

# Tensor methods whose result stays attached to the graph of their receiver
_DIFFERENTIABLE = {
    "abs", "add", "bmm", "clamp", "contiguous", "cpu", "cuda", "cumsum", "diagonal", "div", "double", "exp",
    "flatten", "float", "half", "log", "log_softmax", "matmul", "max", "mean", "min", "mul", "norm", "permute",
    "pow", "prod", "relu", "reshape", "sigmoid", "softmax", "sqrt", "squeeze", "std", "sub", "sum", "t", "tanh",
    "to", "transpose", "unsqueeze", "var", "view",
}
# with a dimension, these return (values, indices): only element 0 carries the graph
_PAIRED = {"max", "min"}
_NO_GRAD = Pattern(r"no_grad|inference_mode")
_PLAIN_TYPES = {"int", "float", "bool", "str"}
_RETURNS_CHAIN = Pattern(r"\breturn\s+(\w+)\s*[.\[]")
_SELF_STORE = Pattern(r"^\s*self\.\w+(?:\[[^\]\n]*\])?\s*(?:\+?=(?!=)|\.append\()(.*)$", re.M)


def may_flow(text: str, params: set[str]) -> bool:
    """The text returns a chain of methods of an argument, or stores a line naming an argument in
    ``self``: ``graph_from``'s and ``keeps``' candidates, found without parsing."""
    params = params - {"self", "cls"}
    if any(m.group(1) in params for m in _RETURNS_CHAIN.finditer(text)):
        return True
    return "self." in text and any(params & set(re.findall(r"\w+", m.group(1))) for m in _SELF_STORE.finditer(text))


def graph_from(node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
               index: dict[str, int]) -> tuple[int, ...]:
    """(p,) where every ``return`` is argument p through differentiable tensor operations only
    (methods such as ``.mean()``, arithmetic with plain values, indexing), and nothing runs under
    ``no_grad``: what the function returns carries the graph its argument p carries."""
    if _blocked(node, nodes):
        return ()
    bound = bound_once(nodes)
    found = {_chain(r.value, index, bound, 0) for r in nodes if isinstance(r, ast.Return)}
    return (found.pop(),) if len(found) == 1 and None not in found else ()  # type: ignore[return-value]


def keeps(node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
          index: dict[str, int]) -> tuple[int, ...]:
    """Arguments (positions after ``self``) a method stores in its object as they are, or in plain
    arithmetic with what it already holds (``self.avg[k] = self.avg[k] * n + value``,
    ``self.values.append(value)``), and never rebinds: what the caller hands in outlives the call.
    A parameter annotated as a plain number or string (``used_tokens: int``) is declared to hold no
    tensor, whatever the caller's expression looks like."""
    if _blocked(node, nodes):
        return ()
    plain = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]
             if isinstance(a.annotation, ast.Name) and a.annotation.id in _PLAIN_TYPES}
    index = {name: i for name, i in index.items() if name not in plain}
    rebound = {n.id for sub in nodes if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
               for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
               for n in walk(t) if isinstance(n, ast.Name)}
    kept: set[int] = set()
    for sub in nodes:
        value = None
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and _on_self(sub.targets[0]):
            value = sub.value
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.op, ast.Add) and _on_self(sub.target):
            value = sub.value
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "append" \
                and _on_self(sub.func.value) and len(sub.args) == 1:
            value = sub.args[0]
        if value is not None:
            kept.update(index[n] for n in _operands(value) if n in index and n not in rebound)
    return tuple(sorted(kept))


def _blocked(node: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST]) -> bool:
    if any(_NO_GRAD.search(ast.unparse(d)) for d in node.decorator_list):
        return True
    return any(isinstance(sub, ast.With) and any(_NO_GRAD.search(ast.unparse(i.context_expr)) for i in sub.items)
               for sub in nodes)


def bound_targets(node: ast.AST) -> list[ast.expr]:
    """The targets ``node`` binds names in: an assignment's (``=``, ``+=``, annotated), a ``for``'s,
    a comprehension's; [] for any other node."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)) else []


def bound_once(nodes: list[ast.AST]) -> dict[str, ast.expr | None]:
    """Local name -> its value where it is assigned exactly once by ``name = value`` (else None)."""
    bound: dict[str, ast.expr | None] = {}
    for sub in nodes:
        for target in bound_targets(sub):
            for name in walk(target):
                if isinstance(name, ast.Name):
                    single = isinstance(sub, ast.Assign) and target is name and name.id not in bound
                    bound[name.id] = sub.value if single else None  # type: ignore[union-attr]
    return bound


def _chain(expr: ast.expr | None, index: dict[str, int], bound: dict[str, ast.expr | None], depth: int) -> int | None:
    """The argument ``expr`` is computed from by differentiable operations only, or None."""
    if expr is None or depth > 8:
        return None
    if isinstance(expr, ast.Name):
        if expr.id in bound:
            return _chain(bound[expr.id], index, bound, depth + 1) if expr.id not in index else None
        return index.get(expr.id)
    if isinstance(expr, ast.Subscript):
        inner = expr.value
        if _paired(inner):  # `x.max(dim=1)[0]`: the values, not the indices
            ok = isinstance(expr.slice, ast.Constant) and expr.slice.value == 0
            return _chain(inner.func.value, index, bound, depth + 1) if ok else None  # type: ignore[attr-defined]
        return _chain(inner, index, bound, depth + 1)
    if isinstance(expr, ast.Attribute) and expr.attr == "values" and _paired(expr.value):
        return _chain(expr.value.func.value, index, bound, depth + 1)  # type: ignore[attr-defined]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _DIFFERENTIABLE \
            and not _paired(expr):
        return _chain(expr.func.value, index, bound, depth + 1)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return _chain(expr.operand, index, bound, depth + 1)
    if isinstance(expr, ast.BinOp):
        sides = [_chain(s, index, bound, depth + 1) for s in (expr.left, expr.right)]
        plain = [s for s, found in zip((expr.left, expr.right), sides) if found is None]
        carried = {s for s in sides if s is not None}
        return carried.pop() if len(carried) == 1 and all(_plain(s) for s in plain) else None
    return None


def _paired(expr: ast.expr) -> bool:
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _PAIRED
            and bool(expr.args or expr.keywords))


def _plain(expr: ast.expr) -> bool:
    """A constant or a name: nothing that could detach or replace the other operand."""
    return isinstance(expr, (ast.Constant, ast.Name, ast.Attribute))


def _on_self(target: ast.expr) -> bool:
    while isinstance(target, ast.Subscript):
        target = target.value
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def _operands(expr: ast.expr) -> list[str]:
    """The names ``expr`` is plain arithmetic of (a call, an attribute or a conversion stops it)."""
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.BinOp):
        return [*_operands(expr.left), *_operands(expr.right)]
    if isinstance(expr, ast.UnaryOp):
        return _operands(expr.operand)
    return []
