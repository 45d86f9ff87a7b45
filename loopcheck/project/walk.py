"""``ast.walk`` and ``ast.iter_child_nodes`` without the expression contexts, in their order, and
the last part of a name (``last_name``), a function body's own nodes (``own_nodes``), and a text's
``ast`` or None where Python cannot read it (``parsed``).

The stdlib's versions go through a generator per node and yield every ``Load()``/``Store()``
singleton too: walking a module's nodes for facts spent most of its time there. No fact reads a
context node, so these leave them out.
"""

from __future__ import annotations

import ast

# The fields of each node type, ``ctx`` left out (filled as types are met)
_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))`` without the expression contexts."""
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(name for name in kind._fields if name != "ctx")
    found: list[ast.AST] = []
    for name in names:
        value = getattr(node, name, None)
        if isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def walk(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))`` (breadth first) without the expression contexts."""
    found = [node]
    for current in found:  # grows while read: each node's children queue after those met before
        found.extend(children(current))
    return found


def last_name(expr: ast.expr) -> str:
    """``DDP`` for ``DDP`` or ``nn.parallel.DDP``; "" for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return ""


def own_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a function body in source order, nested functions and classes left out."""
    found: list[ast.AST] = []
    stack = list(reversed(getattr(node, "body", [])))
    while stack:
        current = stack.pop()
        found.append(current)
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(children(current)))
    return found


def parsed(text: str | bytes) -> ast.Module | None:
    """``ast.parse(text)``, or None for a file Python cannot read (a syntax error, a NUL byte, nesting
    too deep): a file that says nothing."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
