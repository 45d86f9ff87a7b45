"""Loader classes whose ``iter()`` starts no new pass: ``__iter__`` goes on with one iterator the
object made once, in ``__init__``.

yolov5's ``InfiniteDataLoader`` (copied into yolov7, efficientteacher and many detectors)::

    class InfiniteDataLoader(DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "batch_sampler", _RepeatSampler(self.batch_sampler))
            self.iterator = super().__iter__()

        def __iter__(self):
            for _ in range(len(self)):
                yield next(self.iterator)

``next(iter(loader))`` on one hands out the next batch of that iterator: nothing restarts. Read with
the stdlib ``ast`` from the checked file's text or from the project module a name is imported from
(the class itself, or a factory of that module that builds and returns one, such as
``create_dataloader``); the file's cache key already covers the modules it imports.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from loopcheck.project.walk import own_nodes, parsed, walk

if TYPE_CHECKING:
    from loopcheck.project import Imported


def resumes(tree: ast.Module, called: str, position: int | None = None) -> bool:
    """``called`` (a top-level name of ``tree``) is a class whose ``__iter__`` goes on with an
    iterator made once in ``__init__``, or a function of ``tree`` that returns a new instance of one
    (``position``: the element of the tuple it returns that is unpacked into the loader)."""
    found = _top_level(tree, called)
    if isinstance(found, ast.ClassDef):
        return _resuming_class(found)
    if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return any(isinstance(cls := _top_level(tree, name), ast.ClassDef) and _resuming_class(cls)
                   for name in _returned_classes(found, position))
    return False


def resumes_imported(project: Imported, called: str, position: int | None = None) -> bool:
    """``resumes`` for ``called`` imported from a project module (``from utils.datasets import
    create_dataloader``, or ``datasets.create_dataloader`` with the module imported whole)."""
    local, _, attr = called.partition(".")
    imported = project.own.imports.get(local)
    if imported is None or "." in attr:
        return False
    module, name, level = imported
    if attr:  # `import utils.datasets as datasets` then `datasets.create_dataloader(...)`
        target, name = (f"{module}.{name}" if module and name else (name or module)), attr
    elif not name:
        return False
    else:
        target = module
    path = project.index.resolve(project.path, target, level)
    if path is None or not project.index.may_define(path, name):
        return False
    tree = parsed(project.index.text_of(path))
    return tree is not None and resumes(tree, name, position)


def _top_level(tree: ast.Module, name: str) -> ast.AST | None:
    return next((n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == name), None)


def _resuming_class(cls: ast.ClassDef) -> bool:
    """``__iter__`` only hands on what an attribute that ``__init__`` binds yields (``yield
    next(self.iterator)``, ``yield from self.iterator``, ``return self.iterator``) and binds no
    attribute itself."""
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, it = methods.get("__init__"), methods.get("__iter__")
    if init is None or it is None:
        return False
    kept = {a for n in walk(init) for a in _self_targets(n)}
    if any(_self_targets(n) for n in walk(it)):
        return False  # `self.iterator = super().__iter__()` again: a new pass each time
    handed = []
    for node in own_nodes(it):
        if isinstance(node, ast.Yield):
            value = node.value
            if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "next"
                    and len(value.args) == 1):
                return False
            handed.append(value.args[0])
        elif isinstance(node, (ast.YieldFrom, ast.Return)):
            if node.value is None:
                continue
            handed.append(node.value)
    return bool(handed) and all(_self_attribute(h) in kept for h in handed)


def _self_targets(node: ast.AST) -> list[str]:
    """The attributes of ``self`` that ``node`` assigns."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    found = []
    for target in targets:
        for part in walk(target):
            name = _self_attribute(part) if isinstance(part, ast.Attribute) else None
            if name:
                found.append(name)
    return found


def _self_attribute(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def _returned_classes(function: ast.FunctionDef | ast.AsyncFunctionDef, position: int | None) -> set[str]:
    """The names the function may call to build what it returns (at ``position`` of a returned
    tuple), through its own names: ``loader = DataLoader if image_weights else InfiniteDataLoader``,
    ``dataloader = loader(dataset, ...)``, ``return dataloader, dataset``."""
    nodes = own_nodes(function)
    bound: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)

    def values(expr: ast.expr, depth: int = 0) -> list[ast.expr]:
        if isinstance(expr, ast.IfExp):
            return values(expr.body, depth) + values(expr.orelse, depth)
        if isinstance(expr, ast.Name) and expr.id in bound and depth < 3:
            return [v for b in bound[expr.id] for v in values(b, depth + 1)]
        return [expr]

    found: set[str] = set()
    for node in nodes:
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        returned = node.value
        if position is not None:
            if not (isinstance(returned, ast.Tuple) and position < len(returned.elts)):
                continue
            returned = returned.elts[position]
        for value in values(returned):
            if isinstance(value, ast.Call):
                found.update(v.id for v in values(value.func) if isinstance(v, ast.Name))
    return found
