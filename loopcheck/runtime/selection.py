"""Which codes a runtime session reports (``--select`` / ``--ignore``)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from loopcheck.catalog import CODES, Severity, lookup


def _split(values: Iterable[str] | str | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _expand(token: str) -> set[str]:
    """A code, a name or a code prefix (``LC2``, ``LC10``) -> the runtime codes it names."""
    code = lookup(token)
    if code is not None:
        return {code.code}
    prefix = token.upper()
    matched = {c for c in CODES if c.startswith(prefix)}
    if not matched or not prefix.startswith("LC"):
        raise ValueError(f"unknown rule code or name: {token!r}")
    return matched


@dataclass(frozen=True)
class Selection:
    """Codes the user selected. Opt-in codes run only when named exactly (code or name),
    never through a prefix, so ``--select LC1`` does not turn on LC110."""

    selected: frozenset[str] | None = None  # None: every default code
    ignored: frozenset[str] = frozenset()
    named: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, select: Iterable[str] | str | None = None,
              ignore: Iterable[str] | str | None = None) -> Selection:
        select_tokens, ignore_tokens = _split(select), _split(ignore)
        selected: set[str] | None = None
        named: set[str] = set()
        if select_tokens:
            selected = set()
            for token in select_tokens:
                selected |= _expand(token)
                if lookup(token) is not None:
                    named |= _expand(token)
        ignored: set[str] = set()
        for token in ignore_tokens:
            ignored |= _expand(token)
        return cls(None if selected is None else frozenset(selected), frozenset(ignored),
                   frozenset(named))

    def enabled(self, code: str) -> bool:
        entry = CODES[code]
        if code in self.ignored or not entry.runtime:
            return False
        if entry.level is Severity.OPT_IN:
            return code in self.named
        return self.selected is None or code in self.selected


def reported_severity(code: str) -> Severity:
    """Opt-in codes that were selected report as warnings."""
    level = CODES[code].level
    return Severity.WARNING if level is Severity.OPT_IN else level
