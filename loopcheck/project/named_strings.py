"""Which of some names a project writes as whole string literals in its Python files.

argus's trainer steps ``self.optimizer``, which the framework builds from the entry script's
parameters, ``'optimizer': ('AdamW', {'lr': ...})``: no file shows the construction, but the project
names its optimizer class in a string. ``named(index, names)`` gives the names among ``names`` that
some Python file of the project writes as a whole string (``'AdamW'``, not a docstring mentioning it),
or None where the project is too large to read or a file that may hold one does not parse. The answer
depends on every Python file of the project (``inert_settings.stamp`` covers them).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

MAX_FILES = 1000  # a larger tree is a collection of projects: not read


def named(index: ProjectIndex, names: frozenset[str]) -> frozenset[str] | None:
    cache = index.named_strings
    if names not in cache:
        cache[names] = _read(index, names)
    return cache[names]


def _read(index: ProjectIndex, names: frozenset[str]) -> frozenset[str] | None:
    trees = index.parsed_holding([f"{q}{name}{q}".encode() for name in names for q in ("'", '"')], MAX_FILES)
    if trees is None:
        return None
    return frozenset(node.value for tree in trees for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names)
