"""Findings of a runtime session, one per (code, source line), with a repeat count."""
from __future__ import annotations

import linecache
import os
from dataclasses import dataclass

from loopcheck.catalog import CODES, Severity

from .callsite import Site
from .selection import Selection, reported_severity

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
CONTEXT_LINES = 2


def source_context(file: str | None, line: int | None) -> tuple[int | None, dict[str, object] | None]:
    """The 1-based column of the line's first non-blank character, and the line with up to
    ``CONTEXT_LINES`` lines around it, when the file is readable."""
    if not file or not line:
        return None, None
    lines = linecache.getlines(file)
    if not 0 < line <= len(lines):
        return None, None
    text = lines[line - 1].rstrip("\r\n")
    col = len(text) - len(text.lstrip()) + 1 if text.strip() else None
    start = max(1, line - CONTEXT_LINES)
    around = [s.rstrip("\r\n") for s in lines[start - 1:line + CONTEXT_LINES]]
    return col, {"start_line": start, "lines": around}


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    message: str
    file: str | None
    line: int | None
    count: int
    first_step: int
    sampled: bool = False  # the count comes from sampled windows, not from every one

    def as_json(self) -> dict[str, object]:
        col, source = source_context(self.file, self.line)
        return {"code": self.code, "name": self.name, "severity": self.severity.value,
                "message": self.message, "file": self.file, "line": self.line, "col": col,
                "source": source, "count": self.count, "first_step": self.first_step,
                "sampled": self.sampled}

    def at_least(self, level: str) -> bool:
        return _RANK[self.severity] >= _RANK[Severity(level)]


class FindingLog:
    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self._by_key: dict[tuple[str, str | None, int | None], Finding] = {}

    def wants(self, code: str) -> bool:
        return self.selection.enabled(code)

    def add(self, code: str, message: str, site: Site | None, step: int, sampled: bool = False) -> None:
        if not self.selection.enabled(code):
            return
        key = (code, os.path.abspath(site.file) if site else None, site.line if site else None)
        found = self._by_key.get(key)
        if found is not None:
            found.count += 1
            found.sampled = found.sampled or sampled
            return
        self._by_key[key] = Finding(code, CODES[code].name, reported_severity(code), message,
                                    key[1], key[2], 1, step, sampled)

    def all(self) -> list[Finding]:
        return sorted(self._by_key.values(), key=lambda f: (f.first_step, f.code, f.line or 0))

    def codes(self) -> set[str]:
        return {f.code for f in self._by_key.values()}
