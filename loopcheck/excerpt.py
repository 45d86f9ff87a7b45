"""The part of a file that a rule reading only some statements needs, for libcst to parse.

libcst's parser costs about ten times ``ast.parse``, in proportion to the code it is given. A rule
that looks for a few names (the deprecated ``torch.cuda.amp`` API) reads only the statements that
mention them; the others are replaced by empty lines, so every kept statement keeps
its line and columns (positions, suppression comments and fingerprints are those of the whole
file).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection

from loopcheck.patterns import Pattern
from loopcheck.screen import statements


def excerpt(source: str, tree: ast.Module, words: Collection[str]) -> tuple[str, ast.Module]:
    """``source`` with the statements that mention none of ``words`` blanked (at the top level and
    in the classes and functions kept), and the ``ast`` of what is left (the top-level statements
    of ``tree`` kept). Imports are always kept, and so are the
    statements that mention a name an import binds to something whose dotted name holds one of
    ``words`` (``from torch.cuda.amp import autocast as ac`` keeps the statements that say ``ac``)."""
    if "\r" in source or not tree.body:  # lines as ast counts them: only "\n" ends one here
        return source, tree
    if _TAB_INDENT.search(source):
        # libcst's tokenizer refuses some mixes of tabs and spaces that Python accepts: the whole
        # file decides whether it is analysed (LC001), not a part of it
        return source, tree
    lines = source.split("\n")
    kept = _keep(tree.body, lines, _mentions(tree, words), first=False)
    return "\n".join(lines), ast.Module(body=kept, type_ignores=[])


def _keep(statements: list[ast.stmt], lines: list[str], mentions: re.Pattern[str], first: bool) -> list[ast.stmt]:
    """Blank in ``lines`` the ``statements`` (of one block) that ``mentions`` does not match, but
    the block's first one where ``first`` (a body must hold a statement); in a kept class or
    function, likewise its body. The kept statements."""
    # Statements sharing a line (`a = 1; b = 2`) are kept or blanked together.
    groups: list[list[ast.stmt]] = []
    for statement in statements:
        if groups and _first_line(statement) <= groups[-1][-1].end_lineno:  # type: ignore[operator]
            groups[-1].append(statement)
        else:
            groups.append([statement])
    kept: list[ast.stmt] = []
    for i, group in enumerate(groups):
        start, end = _first_line(group[0]), group[-1].end_lineno or group[-1].lineno
        if not (first and i == 0 or any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in group)
                or mentions.search("\n".join(lines[start - 1:end]))):
            lines[start - 1:end] = [""] * (end - start + 1)
            continue
        kept += group
        definition = group[0]
        if len(group) == 1 and isinstance(definition, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and definition.body[0].lineno > definition.lineno:  # not `class A: x = 1` on one line
            _keep(definition.body, lines, mentions, first=True)
    return kept


_TAB_INDENT = Pattern(r"^ *\t", re.M)


def _mentions(tree: ast.Module, words: Collection[str]) -> re.Pattern[str]:
    """A pattern for ``words`` as whole words (``amp`` is in ``torch.cuda.amp``, not in ``sample``),
    ``import`` (an import inside a block) and the names imports bind to something that holds one
    of ``words``."""
    word = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    names: set[str] = set()
    for node in statements(tree):  # imports are statements
        if isinstance(node, ast.Import):
            # `import torch.cuda.amp` is used spelled out; `import torch.cuda.amp as A` as `A`
            names |= {alias.asname for alias in node.names if alias.asname and word.search(alias.name)}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names
                      if word.search(f"{node.module or ''}.{alias.name}")}
    return re.compile(r"\b(?:" + "|".join(map(re.escape, sorted({*words, *names, "import"}))) + r")\b")


def _first_line(statement: ast.stmt) -> int:
    return min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
