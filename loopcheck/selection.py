"""Which codes run: ``--select``, ``--ignore`` and ``--extend-select`` as in ruff.

A selector is a code (``LC101``), a prefix (``LC1``, ``LC``, ``ALL``) or a rule name
(``zero-grad-in-accumulation``). By default every code runs except the opt-in ones (and, in the
static checker, those whose static check alone is opt-in: ``Code.static_opt_in``: LC503, LC605).
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
        hint = did_you_mean(token)
        raise SelectorError(f"unknown rule selector {selector!r} " + (
            f"(did you mean {hint!r}?)" if hint else
            "(expected a code like LC101, a prefix like LC1, or a rule name like zero-grad-in-accumulation)"))
    return matches


def did_you_mean(token: str) -> str | None:
    """The code or rule name a misspelt ``token`` most likely meant (``LC10l`` -> ``LC101``), if one is close."""
    upper = token.strip().upper()
    if upper.startswith("LC"):
        code = "LC" + upper[2:].translate(str.maketrans("LIO", "110"))  # l/I for 1 and O for 0
        return code if code in CODES else closest(upper, list(CODES), cutoff=0.75)
    return closest(token.strip().lower(), [info.name for info in CODES.values()])


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The one choice most similar to ``word``, or None when none is close or two are equally close."""
    import difflib  # only for a word that is not a code or a name: not at every start

    scored = sorted(((difflib.SequenceMatcher(None, word, choice).ratio(), choice) for choice in choices), reverse=True)
    if not scored or scored[0][0] < cutoff or len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


def default_codes(static: bool = True) -> set[str]:
    """Every code but the opt-in ones (for the static checker, also those opt-in only there)."""
    return {code for code, info in CODES.items()
            if info.level is not Severity.OPT_IN and not (static and info.static_opt_in)}


def resolve(select: Iterable[str] | None = None, ignore: Iterable[str] = (),
            extend_select: Iterable[str] = (), static: bool = True) -> frozenset[str]:
    """The codes that run, from ruff-style select/ignore lists (raises SelectorError); ``static``:
    the selection of the static checker, else of the runtime one."""
    chosen = set().union(*(expand(s) for s in select)) if select is not None else default_codes(static)
    for selector in extend_select:
        chosen |= expand(selector)
    for selector in ignore:
        chosen -= expand(selector)
    return frozenset(chosen)
