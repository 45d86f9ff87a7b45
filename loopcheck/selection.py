"""Which codes run: ``--select``, ``--ignore`` and ``--extend-select`` as in ruff.

A selector is a code (``LC101``), a prefix (``LC1``, ``LC``, ``ALL``) or a rule name
(``zero-grad-in-accumulation``). By default every code runs except the opt-in ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from loopcheck.catalog import CODES, Severity, lookup


class SelectorError(ValueError):
    """An unknown code, prefix or name."""


def expand(selector: str) -> set[str]:
    token = selector.strip()
    if not token:
        raise SelectorError("empty selector")
    if token.upper() == "ALL":
        return set(CODES)
    info = lookup(token)
    if info is not None and info.code in CODES:
        return {info.code}
    matches = {code for code in CODES if code.startswith(token.upper())} if token.upper().startswith("LC") else set()
    if not matches:
        raise SelectorError(f"unknown rule selector {selector!r} (expected a code like LC101, a prefix like LC1, "
                            "or a rule name like zero-grad-in-accumulation)")
    return matches


def default_codes() -> set[str]:
    return {code for code, info in CODES.items() if info.level is not Severity.OPT_IN}


def resolve(select: Iterable[str] | None = None, ignore: Iterable[str] = (),
            extend_select: Iterable[str] = ()) -> frozenset[str]:
    """The codes that run, from ruff-style select/ignore lists (raises SelectorError)."""
    chosen = set().union(*(expand(s) for s in select)) if select is not None else default_codes()
    for selector in extend_select:
        chosen |= expand(selector)
    for selector in ignore:
        chosen -= expand(selector)
    return frozenset(chosen)
