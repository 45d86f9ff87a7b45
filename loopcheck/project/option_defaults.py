"""The default of a command-line option that another module of the project declares.

``nn_manager.py`` ends a pass early under ``if args.minibatch_num_train > 0 and data_idx >=
args.minibatch_num_train - 1: break``, and ``config_parse/arg_parse.py`` declares
``parser.add_argument('--minibatch-num-train', type=int, default=0)``: in a run that does not ask
for it, the exit is off. ``option_default(index, "minibatch_num_train")`` reads that from the
project's Python files whose text names the option (``--minibatch-num-train`` or
``--minibatch_num_train``) and gives the default, where exactly one ``add_argument`` declares it
with a number literal; None otherwise (two declarations may differ, a default may be computed).
The answer depends on every Python file of the project (``inert_settings.stamp`` covers them).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

MAX_FILES = 1000  # a larger tree is a collection of projects: not read


def option_default(index: ProjectIndex, name: str) -> float | None:
    """The number literal the project's one ``add_argument`` of the option ``name`` (as argparse
    stores it: ``minibatch_num_train``) gives as its default; None where that is not one literal."""
    if not name.isidentifier():
        return None
    cache = index.option_defaults
    if name not in cache:
        cache[name] = _read(index, name)
    return cache[name]


def _read(index: ProjectIndex, name: str) -> float | None:
    flags = {f"--{name}", f"--{name.replace('_', '-')}"}
    trees = index.parsed_holding([flag.encode() for flag in flags], MAX_FILES)
    if trees is None:
        return None
    found: list[ast.expr | None] = []
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "add_argument" and _declares(node, name, flags):
                found.append(next((k.value for k in node.keywords if k.arg == "default"), None))
    if len(found) != 1 or found[0] is None:
        return None
    return _number(found[0])


def _declares(call: ast.Call, name: str, flags: set[str]) -> bool:
    dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
    if isinstance(dest, ast.Constant):
        return dest.value == name
    return any(isinstance(a, ast.Constant) and a.value in flags for a in call.args)


def _number(expr: ast.expr) -> float | None:
    """``0``, ``-1``, ``0.5``; not a bool, a name or anything computed."""
    sign = 1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        sign, expr = -1, expr.operand
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return sign * expr.value
    return None
