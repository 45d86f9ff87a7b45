"""Inline suppression comments: ``# noqa``, ``# noqa: LC101, LC102`` and ``# loopcheck: ignore[LC101]``.

Codes and rule names are both accepted (``# noqa: zero-grad-in-accumulation``), as ruff and
flake8 users expect; a bare ``# noqa`` silences every finding on the line.
"""

from __future__ import annotations

import re

from loopcheck.catalog import lookup

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:[\s,]+[\w\-]+)*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*loopcheck:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
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
