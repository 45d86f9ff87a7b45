"""Fewer points for a long series without losing its spikes.

``keep(ys_list, buckets)`` cuts the index range into ``buckets`` equal buckets and keeps, in each,
the first sample and the samples holding the minimum and the maximum of every series given: a
single step with 64 backward passes, a one-step memory spike or an LR warm-up peak survives
at any length, and a 100,000-step run plots with at most ``3 x buckets x len(ys_list)`` points.
``None`` values (unknown at that step) are ignored for min/max.
"""

from __future__ import annotations

from collections.abc import Sequence


def keep(ys_list: Sequence[Sequence[float | None]], buckets: int) -> list[int]:
    """Sorted indices to keep; every index when the series are already short enough."""
    length = max((len(ys) for ys in ys_list), default=0)
    if length <= 3 * buckets:
        return list(range(length))
    kept: set[int] = {length - 1}
    for b in range(buckets):
        start, end = b * length // buckets, (b + 1) * length // buckets
        if start >= end:
            continue
        kept.add(start)
        for ys in ys_list:
            lo = hi = None
            for i in range(start, min(end, len(ys))):
                y = ys[i]
                if y is None:
                    continue
                if lo is None or y < ys[lo]:  # type: ignore[operator]
                    lo = i
                if hi is None or y > ys[hi]:  # type: ignore[operator]
                    hi = i
            if lo is not None:
                kept.add(lo)
                kept.add(hi)  # type: ignore[arg-type]
    return sorted(kept)


def pick(values: Sequence[object], indices: Sequence[int]) -> list[object]:
    return [values[i] for i in indices if i < len(values)]
