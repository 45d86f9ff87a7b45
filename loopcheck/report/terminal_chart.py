"""One-line charts for a terminal: a sparkline of a per-step series, squeezed to a width.

Each column stands for a run of consecutive samples and shows their maximum, so a single spike
(one step with 64 backward passes, one memory jump) is never averaged away. ``unicode=False``
draws with ASCII characters for terminals and logs that cannot show block elements.
"""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII = "_.-:=+*#"


def columns(values: Sequence[float | None], width: int) -> list[float | None]:
    """``values`` squeezed to at most ``width`` columns, each the max of its samples."""
    n = len(values)
    if n <= width:
        return list(values)
    out: list[float | None] = []
    for c in range(width):
        chunk = [v for v in values[c * n // width:(c + 1) * n // width] if v is not None]
        out.append(max(chunk) if chunk else None)
    return out


def sparkline(values: Sequence[float | None], width: int, unicode: bool = True, floor: float | None = None) -> str:
    """``floor``: the value drawn as the lowest level (default: the minimum)."""
    glyphs = BLOCKS if unicode else ASCII
    cols = columns(values, width)
    known = [v for v in cols if v is not None]
    if not known:
        return ""
    lo = min(known) if floor is None else min(floor, min(known))
    hi = max(known)
    top = len(glyphs) - 1
    return "".join(" " if v is None else glyphs[0 if hi == lo else round((v - lo) / (hi - lo) * top)] for v in cols)
