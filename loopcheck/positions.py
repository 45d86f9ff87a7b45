"""Line and column of flagged nodes, for files that have findings.

libcst's ``PositionProvider`` regenerates the code of the whole module to count lines, which is
most of the cost of checking a file with findings. Only the top-level statements that hold a
flagged node need that: each is regenerated on its own, and ``ast`` (cheap, in the standard
library) says on which line it starts.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from loopcheck.model.syntax import walk


def locate(module: cst.Module, source: str, nodes: Sequence[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
    """The code range of each of ``nodes`` (and maybe of others) in ``module``."""
    starts = _statement_lines(module, source)
    if starts is None:
        return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
    wanted = {id(n) for n in nodes}
    found: dict[cst.CSTNode, CodeRange] = {}
    for statement, first_line in zip(module.body, starts):
        if not wanted:
            break
        inside = {id(n) for n in walk(statement, into_functions=True)} & wanted
        if not inside:
            continue
        wanted -= inside
        alone = module.with_changes(body=[statement], header=[], footer=[])
        ranges = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        shift = first_line - 1 - len(statement.leading_lines)  # lines above this statement in the file
        for node, where in ranges.items():
            found[node] = CodeRange(CodePosition(where.start.line + shift, where.start.column),
                                    CodePosition(where.end.line + shift, where.end.column))
    return found


def _statement_lines(module: cst.Module, source: str) -> list[int] | None:
    """First line of each top-level statement of ``module`` (decorators included), or None when
    ``ast`` and libcst do not agree on the statements."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    statements = iter(tree.body)
    lines = []
    for statement in module.body:
        count = len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        group = [next(statements, None) for _ in range(count)]
        if group[0] is None:
            return None
        first = group[0]
        decorators = getattr(first, "decorator_list", [])
        lines.append(min([first.lineno, *(d.lineno for d in decorators)]))
    return lines if next(statements, None) is None else None
