"""What a check reports: one ``Finding`` per problem, with a position a person can jump to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    filename: str
    line: int  # 1-based
    col: int  # 1-based, like ruff and editors
    code: str
    name: str
    message: str
    severity: str
    end_line: int = 0
    end_col: int = 0
    source_line: str = ""
    # Hash of the code and the flagged code's text (whitespace-insensitive): identifies the finding
    # across edits that only move it (baselines); several findings may share one.
    fingerprint: str = ""
    fix_message: str | None = None  # what `--fix` would do, if the finding has a fix
    fix_safe: bool = True  # False: only with --unsafe-fixes

    @property
    def fixable(self) -> bool:
        return self.fix_message is not None

    def as_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.filename,
            "location": {"row": self.line, "column": self.col},
            "end_location": {"row": self.end_line, "column": self.end_col},
            "severity": self.severity,
            "fix": None if self.fix_message is None else {
                "message": self.fix_message, "applicability": "safe" if self.fix_safe else "unsafe"},
        }
