"""Files written before Python 3.7 that name a keyword argument ``async``.

PyTorch before 0.4 spelled ``non_blocking=True`` as ``async=True`` (``target.cuda(async=True)``,
``x.to(device, async=True)``), and ``async`` became a keyword in Python 3.7: such a training script
is no longer valid Python, although it still runs where it was written (Python 3.6, torch 0.3/0.4)
and many research repositories still ship it. Refusing the whole file for that one word would hide
every other problem of its loops, so the file is also read with each ``async`` that a ``=`` follows
spelled ``Async``: the same length, so every line and column of the reading is the file's own.
"""

from __future__ import annotations

from loopcheck.patterns import Pattern

# `async` as a name that is assigned: a keyword argument (`cuda(async=True)`), a parameter's default
# (`def cuda(self, async=False)`) or a Python 2 variable; never `async def`/`async for`/`async with`,
# and not a comparison (`async == x`).
_ASSIGNED = Pattern(r"\basync(?=[ \t]*=(?!=))")
SPELLING = "Async"  # as long as `async`: the positions of the reading are those of the file


def read_as_name(source: str) -> str | None:
    """``source`` with every assigned ``async`` spelled ``Async``, or None when it has none."""
    if "async" not in source:
        return None
    read = _ASSIGNED.sub(SPELLING, source)
    return read if read != source else None


NOTE = ("`async` is a keyword since Python 3.7; the rest of the file was checked reading `async=` as the "
        "argument torch < 0.4 named so, `non_blocking=` today")
