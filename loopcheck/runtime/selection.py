"""Which codes a runtime session reports: the static checker's selection rules
(``loopcheck.selection``: codes, names, prefixes, ``ALL``; opt-in codes only when selected),
restricted to the codes that have a runtime check."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from loopcheck.catalog import CODES, Severity
from loopcheck.selection import SelectorError, resolve


def split_selectors(values: Iterable[str] | str | None) -> list[str] | None:
    """``["LC1,LC2", "LC601"]`` -> ``["LC1", "LC2", "LC601"]``; None stays None (no selection)."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@dataclass(frozen=True)
class Selection:
    codes: frozenset[str]

    @classmethod
    def parse(cls, select: Iterable[str] | str | None = None, ignore: Iterable[str] | str | None = None,
              extend_select: Iterable[str] | str | None = None) -> Selection:
        """Raises ``ValueError`` (a ``SelectorError``) for an unknown code, name or prefix."""
        try:
            codes = resolve(split_selectors(select), split_selectors(ignore) or (),
                            split_selectors(extend_select) or (), static=False)
        except SelectorError as exc:
            raise ValueError(str(exc)) from None
        return cls(frozenset(c for c in codes if CODES[c].runtime))

    def enabled(self, code: str) -> bool:
        return code in self.codes


def reported_severity(code: str) -> Severity:
    """Opt-in codes that were selected report as warnings."""
    level = CODES[code].level
    return Severity.WARNING if level is Severity.OPT_IN else level
