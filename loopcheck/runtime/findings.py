"""Findings of a runtime session, one per (code, source line), with a repeat count."""
from __future__ import annotations

import os
from dataclasses import dataclass

from loopcheck.catalog import CODES, Severity

from .callsite import Site
from .selection import Selection, reported_severity

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


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

    def as_json(self) -> dict[str, object]:
        return {"code": self.code, "name": self.name, "severity": self.severity.value,
                "message": self.message, "file": self.file, "line": self.line,
                "count": self.count, "first_step": self.first_step}

    def at_least(self, level: str) -> bool:
        return _RANK[self.severity] >= _RANK[Severity(level)]


class FindingLog:
    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self._by_key: dict[tuple[str, str | None, int | None], Finding] = {}

    def wants(self, code: str) -> bool:
        return self.selection.enabled(code)

    def add(self, code: str, message: str, site: Site | None, step: int) -> None:
        if not self.selection.enabled(code):
            return
        key = (code, os.path.abspath(site.file) if site else None, site.line if site else None)
        found = self._by_key.get(key)
        if found is not None:
            found.count += 1
            return
        self._by_key[key] = Finding(code, CODES[code].name, reported_severity(code), message,
                                    key[1], key[2], 1, step)

    def all(self) -> list[Finding]:
        return sorted(self._by_key.values(), key=lambda f: (f.first_step, f.code, f.line or 0))

    def codes(self) -> set[str]:
        return {f.code for f in self._by_key.values()}
