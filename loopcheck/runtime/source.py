"""Reading the user's source after the fact (never on the hot path): which statement a
finding should point at when the line that ran is not the line to change."""
from __future__ import annotations

import ast
import functools
import linecache

from .callsite import Site


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.Module | None:
    text = "".join(linecache.getlines(path))
    if not text:
        return None
    try:
        return ast.parse(text, path)
    except (SyntaxError, ValueError):
        return None


def condition_of(site: Site | None) -> Site | None:
    """The ``if``/``elif``/``while`` whose body holds ``site`` (the innermost, within the same
    function): the step condition of an ``optimizer.step()`` line. None when there is none."""
    if site is None:
        return None
    tree = _tree(site.file)
    if tree is None:
        return None
    best: ast.If | ast.While | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)) and node.body and \
                node.body[0].lineno <= site.line <= (node.body[-1].end_lineno or 0) and \
                (best is None or node.lineno > best.lineno):
            best = node
    if best is None or _function_between(tree, best, site.line):
        return None
    return Site(site.file, best.lineno)


def _function_between(tree: ast.Module, outer: ast.AST, line: int) -> bool:
    """A function defined inside ``outer`` that holds ``line``: then ``outer`` is not its
    condition (the body runs when the function is called)."""
    for node in ast.walk(outer):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                node.lineno <= line <= (node.end_lineno or 0):
            return True
    return False


def accumulating_line(site: Site, name: str, first_line: int) -> Site | None:
    """The statement of the function starting at ``first_line`` that accumulates into ``name``:
    ``name += ...``, ``name = name + ...``, ``name.append(...)``/``extend``/``insert``."""
    tree = _tree(site.file)
    if tree is None:
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == first_line:
            scope = node
            break
    found: list[int] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.AugAssign) and _names(node.target, name):
            found.append(node.lineno)
        elif isinstance(node, ast.Assign) and any(_names(t, name) for t in node.targets) and \
                any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value)):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("append", "extend", "insert") and _names(node.func.value, name):
            found.append(node.lineno)
    return Site(site.file, min(found)) if found else None


def _names(node: ast.AST, name: str) -> bool:
    """``node`` is the variable ``name`` or the attribute ``self.name``."""
    if isinstance(node, ast.Name):
        return node.id == name
    return isinstance(node, ast.Attribute) and node.attr == name.rpartition(".")[2] and "." in name


def in_loop(site: Site) -> bool | None:
    """Whether ``site`` sits in a ``for``/``while`` of its own function (None: source unknown)."""
    tree = _tree(site.file)
    if tree is None:
        return None
    function: ast.AST = tree
    for node in ast.walk(tree):  # the innermost function holding the line
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                node.lineno <= site.line <= (node.end_lineno or 0) and \
                (function is tree or node.lineno > function.lineno):  # type: ignore[attr-defined]
            function = node
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and \
                node.lineno <= site.line <= (node.end_lineno or 0) and \
                not _function_between(tree, node, site.line):
            return True
    return False
