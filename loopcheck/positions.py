"""Line and column of flagged nodes, for files that have findings.

libcst's ``PositionProvider`` regenerates the code of the whole module to count lines, which is
most of the cost of checking a file with findings. Only the top-level statements that hold a
flagged node need that: each is regenerated on its own, and ``ast`` (cheap, in the standard
library) says on which line it starts. Cheaper still, and tried first: libcst gives back the exact
text of a node, so a node whose text occurs once in the lines of its top-level statement is found
by a text search (a training loop's `main()` is often most of a file).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from loopcheck.model.syntax import walk


def locate(module: cst.Module, source: str, nodes: Sequence[cst.CSTNode],
           tree: ast.Module | None = None) -> dict[cst.CSTNode, CodeRange]:
    """The code range of each of ``nodes`` (and maybe of others) in ``module``; ``tree``: the
    ``ast`` of ``source`` when the caller has it (parsed here otherwise)."""
    starts = _statement_lines(module, source, tree)
    if starts is None:
        return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
    wanted = {id(n): n for n in nodes}
    found: dict[cst.CSTNode, CodeRange] = {}
    # Lines as ast counts them; a lone "\r" (an old Mac line end) would need more care: no search then.
    searchable = "\r" not in source.replace("\r\n", "")
    lines = [line + "\n" for line in source.split("\n")]
    for i, (statement, first_line) in enumerate(zip(module.body, starts)):
        if not wanted:
            break
        inside = {id(n) for n in walk(statement, into_functions=True)} & set(wanted)
        if not inside:
            continue
        last_line = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines)
        region = "".join(lines[first_line - 1:last_line])
        searched = {key: _search(module, wanted[key], region, first_line) if searchable else None for key in inside}
        for key, where in searched.items():
            node = wanted.pop(key)
            if where is not None:
                found[node] = where
        if all(where is not None for where in searched.values()):
            continue
        alone = module.with_changes(body=[statement], header=[], footer=[])
        ranges = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        shift = first_line - 1 - len(statement.leading_lines)  # lines above this statement in the file
        for node, where in ranges.items():
            found[node] = CodeRange(CodePosition(where.start.line + shift, where.start.column),
                                    CodePosition(where.end.line + shift, where.end.column))
    return found


def _search(module: cst.Module, node: cst.CSTNode, region: str, first_line: int) -> CodeRange | None:
    """The range of ``node`` found by its text in ``region`` (its top-level statement's lines,
    starting at ``first_line``), when that text is one line and occurs there exactly once. (A node
    of several lines is generated without the indentation of the blocks around it, so its text is
    not the file's: those are left to ``PositionProvider``.)"""
    if isinstance(node, cst.SimpleStatementLine):  # its range: its statement, comment and newline left out
        if len(node.body) != 1:
            return None
        node = node.body[0]
    text = module.code_for_node(node)
    if not text.strip() or "\n" in text or "\r" in text:
        return None
    at = region.find(text)
    if at < 0 or region.find(text, at + 1) >= 0:
        return None  # not unique
    line = first_line + region.count("\n", 0, at)
    column = at - (region.rfind("\n", 0, at) + 1)
    return CodeRange(CodePosition(line, column), CodePosition(line, column + len(text)))


def _statement_lines(module: cst.Module, source: str, tree: ast.Module | None) -> list[int] | None:
    """First line of each top-level statement of ``module`` (decorators included), or None when
    ``ast`` and libcst do not agree on the statements."""
    if tree is None:
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
