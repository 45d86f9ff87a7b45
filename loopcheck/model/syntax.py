"""Small, fast helpers over libcst nodes.

libcst's own ``visit`` rebuilds every node it passes (a full copy per traversal); these helpers
only read dataclass fields, which is several times cheaper on the files we look at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

# Fields that hold only whitespace, brackets or punctuation: never a call or a name.
_SKIP_FIELD = ("whitespace", "lpar", "rpar", "comma", "semicolon", "colon", "newline", "leading_lines",
               "header", "footer", "lines_after_decorators", "equal", "star", "dot", "lbracket",
               "rbracket", "lbrace", "rbrace", "operator", "asynchronous", "first_line", "indent")
_FIELDS: dict[type, tuple[str, ...]] = {}
# libcst node classes are ABCs, and isinstance() against an ABC is slow; the walkers below run
# over every node of a file, so they test `type(x)` against this cache instead.
_IS_NODE: dict[type, bool] = {}


def is_node(value: object) -> bool:
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def _fields(node_type: type) -> tuple[str, ...]:
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node_type) if not f.name.startswith(_SKIP_FIELD))
        _FIELDS[node_type] = names
    return names


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in _fields(type(node)):
        value = getattr(node, name)
        if type(value) in (tuple, list):
            for item in value:
                if is_node(item):
                    yield item
        elif is_node(value):
            yield value


_SCOPES = (cst.Lambda, cst.FunctionDef, cst.ClassDef)


def walk(node: cst.CSTNode, *, into_functions: bool = False) -> Iterator[cst.CSTNode]:
    """Pre-order walk of ``node`` and its descendants (lambdas and nested defs skipped)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and not into_functions and type(current) in _SCOPES:
            continue
        stack.extend(reversed(list(children(current))))


def dotted(expr: cst.BaseExpression | None) -> str | None:
    """``self.optimizer`` for an Attribute chain of Names, ``None`` for anything else."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    return None


_EMPTY = cst.Module(body=[])


def source(node: cst.CSTNode) -> str:
    """The code of one node, whitespace normalised by libcst's generator."""
    return _EMPTY.code_for_node(node)


def receiver(expr: cst.BaseExpression) -> str:
    """A stable text for the object a method is called on: ``optimizers[0]``, ``self.opt``."""
    return dotted(expr) or source(expr)


def last_part(name: str) -> str:
    """``self.lr_scheduler`` -> ``lr_scheduler``; ``opts[0]`` -> ``opts``."""
    return name.split("[", 1)[0].rsplit(".", 1)[-1]


def func_name(call: cst.Call) -> str | None:
    """Dotted name of what is called (``torch.nn.utils.clip_grad_norm_``), if it is a plain name."""
    return dotted(call.func)


def own_call_name(call: cst.Call) -> str | None:
    """The name a call may reach a function or method of the same file by: ``fn(...)`` or
    ``self.fn(...)``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value
    return None


def method(call: cst.Call) -> tuple[cst.BaseExpression, str] | None:
    """(receiver expression, method name) for ``x.m(...)``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.value, call.func.attr.value
    return None


def names_in(expr: cst.CSTNode) -> set[str]:
    """The names read in ``expr``, dotted chains whole: ``args.accum * i`` -> {``args.accum``, ``i``}."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        name = dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name is not None:
            found.add(name)
            continue
        if isinstance(node, (cst.Lambda, cst.FunctionDef)):
            continue
        stack.extend(children(node))
    return found


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def int_value(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = int_value(expr.expression)
        return -inner if inner is not None else None
    return None


def same(a: cst.CSTNode | None, b: cst.CSTNode | None) -> bool:
    """Structural equality of two expressions, ignoring whitespace and parentheses."""
    if a is None or b is None:
        return a is b
    return source(a).replace(" ", "").strip("()") == source(b).replace(" ", "").strip("()")


def target_names(target: cst.BaseAssignTargetExpression | cst.BaseExpression) -> list[str]:
    """Names bound by an assignment target: ``a``, ``self.a``, each element of ``a, (b, c)``."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for element in target.elements:
            out.extend(target_names(element.value))
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    name = dotted(target)
    return [name] if name else []
