"""LC102: under accumulation each micro-batch's loss must be divided by the window size
(or normalised by a window-wide count, which is not checked)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..hooks.backward import FULL_INSPECTION_WINDOWS

if TYPE_CHECKING:
    from ..session import Session
    from ..state import BackwardInfo

_TOLERANCE = 0.02


def check(session: Session, micro: list[BackwardInfo], step: int) -> None:
    size = len(micro)
    scales = [bw.scale for bw in micro]
    if size < 2 or any(s is None or not s.known for s in scales):
        return
    factors = [s.factor for s in scales if s is not None]
    site = micro[-1].site
    # after the first windows only one in INSPECT_EVERY is read: the count is a sample
    sampled = session.windows_closed > FULL_INSPECTION_WINDOWS
    if max(factors) - min(factors) > _TOLERANCE * max(abs(f) for f in factors):
        divisors_seen = [round(1 / f, 6) for f in factors]
        if sorted(divisors_seen) != [float(k) for k in range(1, size + 1)]:
            return  # varying, but not a running count: a per-batch count (tokens, samples)
        divisors = ", ".join(f"{d:g}" for d in divisors_seen)
        session.report("LC102", f"the loss divisor changes within one window ({divisors}): a "
                       "running count weighs micro-batches unevenly; divide every micro-batch "
                       f"by the window size {size}", site, step, sampled)
    elif abs(factors[0] - 1.0) <= _TOLERANCE:
        session.report("LC102", f"the loss is not divided by the {size} micro-batches of its "
                       f"window: every optimizer step is {size}x too large; use loss / {size}",
                       site, step, sampled)
    elif abs(factors[0] * size - 1.0) > _TOLERANCE:
        session.report("LC102", f"the loss is divided by {1 / factors[0]:g} but each window has "
                       f"{size} micro-batches", site, step, sampled)
