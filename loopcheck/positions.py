"""Line and column of flagged nodes, for files that have findings.

libcst's ``PositionProvider`` regenerates the code of the whole module to count lines, which is
most of the cost of checking a file with findings. Only the top-level statements that hold a
flagged node need that: each is regenerated on its own, and ``ast`` (cheap, in the standard
library) says on which line it starts. Cheaper still, and tried first: libcst gives back the exact
text of a node, so a node whose text occurs once in the lines of its top-level statement is found
by a text search: first in the whole file, then, for a text that occurs more than once there, in
the lines of its top-level statement (a training loop's `main()` is often most of a file).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from loopcheck.model.syntax import children, walk
from loopcheck.project.walk import parsed


def locate(module: cst.Module, source: str, nodes: Sequence[cst.CSTNode],
           tree: ast.Module | None = None) -> dict[cst.CSTNode, CodeRange]:
    """The code range of each of ``nodes`` (and maybe of others) in ``module``; ``tree``: the
    ``ast`` of ``source`` when the caller has it (parsed here otherwise)."""
    top = _statement_lines(module, source, tree)
    if top is None:
        return dict(_provided(module))
    starts = [line for line, _ in top]
    top_trees = [first for _, first in top]
    wanted = {id(n): n for n in nodes}
    found: dict[cst.CSTNode, CodeRange] = {}
    # Lines as ast counts them; a lone "\r" (an old Mac line end) would need more care: no search then.
    searchable = "\r" not in source.replace("\r\n", "")
    texts: dict[int, str | None] = {}
    if searchable:
        # A text that occurs once in the file occurs once in its statement's lines: the same range,
        # without walking the statements to find which one holds the node.
        for key, node in list(wanted.items()):
            texts[key] = _text(module, node)
            where = _search(texts[key], source, 1)
            if where is not None:
                found[node] = where
                del wanted[key]
    lines = [line + "\n" for line in source.split("\n")]
    for i, (statement, first_line) in enumerate(zip(module.body, starts)):
        if not wanted:
            break
        inside = {id(n) for n in walk(statement, into_functions=True)} & set(wanted)
        if not inside:
            continue
        last_line = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines)
        region = "".join(lines[first_line - 1:last_line])
        searched = {key: _search(texts[key], region, first_line) if searchable else None for key in inside}
        for key, where in searched.items():
            node = wanted.pop(key)
            if where is not None:
                found[node] = where
        if all(where is not None for where in searched.values()):
            continue
        left = {key for key, where in searched.items() if where is None}
        # an excerpt (never of a text with "\r") blanks statements its ast still holds
        nested = _nested(module, statement, top_trees[i], left, None if "\r" in source else lines)
        if nested is not None:
            found.update(nested)
            continue
        alone = module.with_changes(body=[statement], header=[], footer=[])
        ranges = _provided(alone)
        shift = first_line - 1 - len(statement.leading_lines)  # lines above this statement in the file
        for node, where in ranges.items():
            found[node] = CodeRange(CodePosition(where.start.line + shift, where.start.column),
                                    CodePosition(where.end.line + shift, where.end.column))
    return found


def locate_built(nodes: Sequence[cst.CSTNode | None]) -> dict[cst.CSTNode, CodeRange]:
    """``locate`` for the nodes of the tree ``loopcheck.model.from_ast`` built last: their ranges
    come from ``ast``. Raises ``LookupError`` for a node of ``nodes`` that tree cannot place as
    libcst would (one in brackets of its own); a statement (every second node) needs only its line."""
    from loopcheck.model.from_ast import line_column, position, start

    found: dict[cst.CSTNode, CodeRange] = {}
    for index, node in enumerate(nodes):
        if node is None or node in found:
            continue
        where = position(node)
        if where is None and index % 2:
            at = start(node)
            if at is not None:
                where = (*line_column(at), 0, 0)
        if where is None:
            raise LookupError(f"no position for a {type(node).__name__}")
        found[node] = CodeRange(CodePosition(where[0], where[1]), CodePosition(where[2], where[3]))
    return found


def _nested(module: cst.Module, statement: cst.BaseStatement, tree: ast.stmt, keys: set[int],
            lines: list[str] | None) -> dict[cst.CSTNode, CodeRange] | None:
    """The ranges of the nodes of ``keys`` (ids) in ``statement`` (top-level, ``tree`` in ``ast``),
    from regenerating only the innermost statement of a block that holds each: that statement's
    line comes from ``ast``, and the indentation of the blocks around it is handed to the
    generator, so it is written as in the file. None where the two trees do not line up (the
    whole statement is regenerated then)."""
    units, owner = _statements(module, statement, keys)
    trees = _tree_statements(tree, lines)
    if len(units) != len(trees) or any(kind != _kind(t) for (kind, _, _), t in zip(units, trees)):
        return None
    if not keys <= owner.keys() or 0 in owner.values():
        return None  # a node of the top-level statement's own lines: regenerated whole anyway
    found: dict[cst.CSTNode, CodeRange] = {}
    for index in set(owner.values()):
        _, inner, indents = units[index]
        assert inner is not None and indents is not None
        place = trees[index]
        decorators = getattr(place, "decorator_list", [])
        first_line = min([place.lineno, *(d.lineno for d in decorators)])
        provider = PositionProvider()
        provider._computed = {}
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline, provider=provider,
            indent_tokens=list(indents), line=first_line - len(inner.leading_lines))
        inner._codegen(state)
        ranges = provider._computed
        if not decorators and ranges[inner].start != CodePosition(place.lineno, place.col_offset):
            return None  # not where ast says it is: leave it to the whole statement
        found.update(ranges)
    return found


def _statements(module: cst.Module, statement: cst.BaseStatement,
                keys: set[int]) -> tuple[list[tuple[str, cst.BaseStatement | None, list[str] | None]], dict[int, int]]:
    """The statements of ``statement`` in pre-order as ``ast`` lists them (one per small statement),
    each with its node and the indentation of the blocks around it where it is a statement of a
    block (regenerable alone); and for each id of ``keys`` found, the index of the innermost such
    statement holding that node."""
    units: list[tuple[str, cst.BaseStatement | None, list[str] | None]] = []
    owner: dict[int, int] = {}
    # (node, indentation of its block, index of the innermost block statement holding it, in a block)
    stack: list[tuple[cst.CSTNode, list[str], int, bool]] = [(statement, [], 0, True)]
    while stack:
        node, indents, current, in_block = stack.pop()
        if in_block:
            current = len(units)
            if isinstance(node, cst.SimpleStatementLine):
                units.append((type(node.body[0]).__name__, node, indents))
                units.extend((type(small).__name__, None, None) for small in node.body[1:])
            else:
                units.append((type(node).__name__, node, indents))
        elif isinstance(node, cst.BaseCompoundStatement):  # an `elif`
            units.append((type(node).__name__, None, None))
        elif isinstance(node, cst.SimpleStatementSuite):  # `if x: a; b`
            units.extend((type(small).__name__, None, None) for small in node.body)
        if id(node) in keys:
            owner[id(node)] = current
        if type(node) is cst.IndentedBlock:
            inner = [*indents, module.default_indent if node.indent is None else node.indent]
            stack.extend((child, inner, current, True) for child in reversed(node.body))
        else:
            if type(node) is cst.Match:  # its cases are indented (the only indentation besides blocks')
                indents = [*indents, module.default_indent if node.indent is None else node.indent]
            stack.extend((child, indents, current, False) for child in reversed(children(node)))
    return units, owner


def _tree_statements(tree: ast.stmt, lines: list[str] | None) -> list[ast.stmt]:
    """The statements of ``tree`` (itself first) in pre-order, less those whose first line is blank
    in ``lines`` (when given): statements an excerpt (``loopcheck.excerpt``) blanked out of the text
    libcst parsed, which its ``ast`` still holds inside the kept functions and classes."""
    found = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            if lines is not None and not lines[node.lineno - 1].strip():
                continue
            found.append(node)
        stack.extend(reversed([child for child in ast.iter_child_nodes(node)
                               if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))]))
    return found


def _kind(node: ast.stmt) -> str:
    """The name of the libcst class of ``node``'s statement."""
    name = type(node).__name__
    return "Del" if name == "Delete" else name[5:] if name.startswith("Async") else name


def _provided(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """``MetadataWrapper(module).resolve(PositionProvider)`` without its second pass: ``resolve`` also
    visits every node for the batched providers, of which there are none here (~40 % of its cost)."""
    return PositionProvider()._gen(MetadataWrapper(module, unsafe_skip_copy=True))


def _text(module: cst.Module, node: cst.CSTNode) -> str | None:
    """The text of ``node`` a search can look for: its code when that is one line (a node of
    several lines is generated without the indentation of the blocks around it, so its text is not
    the file's: those are left to ``PositionProvider``)."""
    if isinstance(node, cst.SimpleStatementLine):  # its range: its statement, comment and newline left out
        if len(node.body) != 1:
            return None
        node = node.body[0]
    text = module.code_for_node(node)
    if not text.strip() or "\n" in text or "\r" in text:
        return None
    return text


def _search(text: str | None, region: str, first_line: int) -> CodeRange | None:
    """The range of a node of ``text`` (see ``_text``) found in ``region`` (lines of the file from
    ``first_line`` on), when ``text`` occurs there exactly once."""
    if text is None:
        return None
    at = region.find(text)
    if at < 0 or region.find(text, at + 1) >= 0:
        return None  # not unique
    line = first_line + region.count("\n", 0, at)
    column = at - (region.rfind("\n", 0, at) + 1)
    return CodeRange(CodePosition(line, column), CodePosition(line, column + len(text)))


def _statement_lines(module: cst.Module, source: str,
                     tree: ast.Module | None) -> list[tuple[int, ast.stmt]] | None:
    """First line of each top-level statement of ``module`` (decorators included), with the first
    ``ast`` statement of it, or None when ``ast`` and libcst do not agree on the statements."""
    if tree is None:
        tree = parsed(source)
        if tree is None:
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
        lines.append((min([first.lineno, *(d.lineno for d in decorators)]), first))
    return lines if next(statements, None) is None else None
