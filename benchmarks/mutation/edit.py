"""Line-preserving edits of a source file, for the mutation operators.

Every edit keeps the file's line count, so a finding's row means the same line before and after the
mutation and the two checks can be compared line by line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator


def lines_of(source: str) -> list[str]:
    return source.splitlines(keepends=True)


def replaced(source: str, first: int, last: int, new: list[str]) -> str:
    """``source`` with lines ``first``..``last`` (1-based, inclusive) replaced by ``new`` (padded with
    blank lines to the same count; ``new`` must not be longer)."""
    old = lines_of(source)
    count = last - first + 1
    if len(new) > count:
        raise ValueError("an edit must not add lines")
    body = [line if line.endswith("\n") else line + "\n" for line in new] + ["\n"] * (count - len(new))
    return "".join(old[: first - 1] + body + old[last:])


def alone_on_its_lines(source: str, node: ast.stmt, tree: ast.Module) -> bool:
    """No other statement starts or ends on the lines of ``node`` (``a(); b()`` is left alone)."""
    end = node.end_lineno or node.lineno
    for other in ast.walk(tree):
        if isinstance(other, ast.stmt) and other is not node and not _inside(other, node) and not _inside(node, other):
            other_end = other.end_lineno or other.lineno
            if other.lineno <= end and other_end >= node.lineno:
                return False
    return True


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def indent_of(source: str, line: int) -> str:
    text = lines_of(source)[line - 1]
    return text[: len(text) - len(text.lstrip())]


def without(source: str, node: ast.stmt) -> str:
    """``source`` with statement ``node`` replaced by ``pass`` (same indentation, same line count)."""
    return replaced(source, node.lineno, node.end_lineno or node.lineno, [indent_of(source, node.lineno) + "pass"])


def with_statement(source: str, node: ast.stmt, text: str) -> str:
    """``source`` with statement ``node`` replaced by one-line ``text`` (indented like it)."""
    return replaced(source, node.lineno, node.end_lineno or node.lineno, [indent_of(source, node.lineno) + text])


def calls(tree: ast.AST, method: str) -> Iterator[ast.Call]:
    """Every call ``<anything>.method(...)`` in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method:
            yield node


def expression_statements(tree: ast.AST, method: str) -> Iterator[ast.Expr]:
    """Every statement that is exactly a call ``<anything>.method(...)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr == method:
            yield node


def enclosing_loops(tree: ast.AST, node: ast.AST) -> list[ast.For | ast.While]:
    """The ``for``/``while`` loops around ``node``, outermost first (stops at a function boundary)."""
    path: list[ast.AST] = []

    def visit(current: ast.AST, trail: list[ast.AST]) -> bool:
        if current is node:
            path.extend(trail)
            return True
        return any(visit(child, [*trail, current]) for child in ast.iter_child_nodes(current))

    visit(tree, [])
    loops: list[ast.For | ast.While] = []
    for step in path:
        if isinstance(step, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            loops = []
        elif isinstance(step, (ast.For, ast.AsyncFor, ast.While)):
            loops.append(step)  # type: ignore[arg-type]
    return loops
