"""Whether a loop runs inside a pytest test function.

A ``test_*`` function in a file pytest collects (``test_*.py``, ``*_test.py``) or under a ``tests/``
folder checks a property of a few hand-written steps (two modules' gradients accumulated the same
way, an optimizer wrapper's update): it trains no model that is used afterwards.

>>> pytest_file("tests/optim/test_wrapper.py"), pytest_file("train.py"), pytest_file("tests/helpers.py")
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import func_name, inner_nodes

if TYPE_CHECKING:
    from loopcheck.model import FileModel, Loop


def pytest_file(filename: str) -> bool:
    """``test_*.py``, ``*_test.py``, or a file under a ``tests/`` folder."""
    path = PurePath(filename)
    return path.suffix == ".py" and (path.name.startswith("test_") or path.name.endswith("_test.py")
                                     or "tests" in path.parts[:-1])


def in_pytest_test(model: FileModel, loop: Loop) -> bool:
    """Whether ``loop`` is in a ``test_*`` function (a pytest test; unittest's ``testNumericBatchNorm``)
    of a file pytest collects, or in a helper of that file that only such tests call
    (``_test_wrapper(name)`` shared by ``test_lookahead`` and ``test_scout``): not an evaluation
    function called ``test``, nor a ``test_*`` helper of a training script."""
    function = loop.function
    if function is None or not pytest_file(_within_project(model)):
        return False
    name = function.name.value
    if name.startswith("test_") or name[4:5].isupper() and name.startswith("test"):
        return True
    callers = [outer for outer, call in _calls_in_functions(model.module) if func_name(call) == name]
    return bool(callers) and all(c is not None and c.name.value.startswith("test_") for c in callers)


def _within_project(model: FileModel) -> str:
    """The checked path relative to the project root where there is one: a checkout that itself
    lives under some ``tests/`` folder does not make every file a test."""
    project = model.project
    if project is not None:
        try:
            return project.index.relative(project.path)
        except (OSError, ValueError):
            pass
    return model.filename


def _calls_in_functions(module: cst.Module) -> Iterator[tuple[cst.FunctionDef | None, cst.Call]]:
    """Every call of the module with the function whose body holds it (None: module level)."""
    stack: list[tuple[cst.CSTNode, cst.FunctionDef | None]] = [(module, None)]
    while stack:
        node, outer = stack.pop()
        kind = type(node)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.FunctionDef:
            outer = node  # type: ignore[assignment]
        elif kind is cst.Call:
            yield outer, node  # type: ignore[misc]
        stack.extend((child, outer) for child in inner_nodes(node))  # a leaf (a name) holds no call
