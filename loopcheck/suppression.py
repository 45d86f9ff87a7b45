"""Inline suppression comments: ``# noqa``, ``# noqa: LC101, LC102`` and ``# loopcheck: ignore[LC101]``.

Codes and rule names are both accepted (``# noqa: zero-grad-in-accumulation``), as ruff and
flake8 users expect; a bare ``# noqa`` silences every finding on the line. A code that does not
exist (``# noqa: LC10l``) silences nothing, so ``unknown_codes`` finds them for a warning, the way
ruff reports invalid ``noqa`` codes.
"""

from __future__ import annotations

import re

from loopcheck.catalog import lookup
from loopcheck.patterns import Pattern
from loopcheck.selection import closest, did_you_mean

_NOQA = Pattern(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:[\s,]+[\w\-]+)*))?", re.IGNORECASE)
_IGNORE = Pattern(r"#\s*loopcheck:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
ALL = "*"


def suppressed_codes(line: str) -> set[str]:
    """Codes silenced by the comments on one source line (``{"*"}`` for a bare noqa)."""
    if "#" not in line:
        return set()
    found: set[str] = set()
    for pattern in (_NOQA, _IGNORE):
        for match in pattern.finditer(line):
            codes = match.group("codes")
            if codes is None:
                found.add(ALL)
                continue
            for token in re.split(r"[\s,]+", codes.strip()):
                info = lookup(token)
                if info is not None:
                    found.add(info.code)
                elif not token.upper().startswith("LC"):
                    continue  # another tool's code (`# noqa: E501, LC101`)
    return found


def is_suppressed(code: str, lines: list[str], candidates: tuple[int, ...]) -> bool:
    """Whether ``code`` is silenced on any of the 1-based ``candidates`` lines."""
    for number in candidates:
        if 1 <= number <= len(lines):
            codes = suppressed_codes(lines[number - 1])
            if ALL in codes or code in codes:
                return True
    return False


def unknown_codes(source: str) -> list[tuple[int, int, str, str | None]]:
    """``(line, column, token, suggestion)`` (1-based) for each code of a suppression comment in
    ``source`` that is loopcheck's by its form (``LC...``, a kebab-case name close to a rule's, any
    code in ``loopcheck: ignore[...]``) but names no code."""
    if "noqa" not in source and "NOQA" not in source and "loopcheck:" not in source:
        return []  # a substring test first: the regular expressions then run on few files
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if "#" not in line:
            continue
        lowered = line.lower()
        if "noqa" not in lowered and "loopcheck:" not in lowered:
            continue  # neither pattern (both ignore case) can match: most comments of a file
        for pattern in (_NOQA, _IGNORE):
            for match in pattern.finditer(line):
                codes = match.group("codes")
                if not codes:
                    continue
                start = match.start("codes")
                for token in re.finditer(r"[^\s,]+", codes):
                    text = token.group()
                    if lookup(text) is not None or not _ours(text, pattern is _IGNORE):
                        continue
                    found.append((number, start + token.start() + 1, text, did_you_mean(text)))
    return found


def _ours(token: str, in_ignore: bool) -> bool:
    if in_ignore or token.upper().startswith("LC"):
        return True
    from loopcheck.catalog import CODES

    # other tools' codes have no hyphens; a hyphenated word close to a rule name is a misspelt one
    return "-" in token and closest(token.lower(), [c.name for c in CODES.values()], cutoff=0.8) is not None
