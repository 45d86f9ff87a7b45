"""LC602: allocated device memory that keeps growing from step to step (samples taken by
``hooks.memory``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

WARMUP_STEPS = 3  # the first steps allocate optimizer state and workspaces
MIN_SAMPLES = 8


@dataclass(frozen=True)
class Growth:
    start_bytes: int
    end_bytes: int
    steps: int

    @property
    def per_step(self) -> float:
        return (self.end_bytes - self.start_bytes) / max(self.steps, 1)


def detect_growth(samples: list[tuple[int, int]], min_total: int = 16 << 20) -> Growth | None:
    """Memory that trends upwards and does not come back, whether it creeps up every step or
    rises in stairs (once per epoch, e.g. a validation loss summed with its graph), so most
    step-to-step deltas may be zero. After warm-up:

    * it gains at least ``min_total`` bytes and 5% from the first to the last sample;
    * the last quarter of the samples stays above everything in the first quarter;
    * the trend is monotone: Kendall's tau of memory against step is 0.6 or more (three equal
      stairs give 0.67; a sawtooth or noise around a level gives about 0);
    * no single rise holds more than 60% of the gain: one late allocation (a workspace, an
      optimizer's lazily created state) is a step up, not a leak."""
    usable = [s for s in samples if s[0] > WARMUP_STEPS]
    if len(usable) < MIN_SAMPLES:
        return None
    values = [v for _, v in usable]
    first, last = values[0], values[-1]
    gained = last - first
    if gained < min_total or gained < 0.05 * max(first, 1):
        return None
    quarter = max(len(values) // 4, 1)
    if min(values[-quarter:]) <= max(values[:quarter]):
        return None
    if max(b - a for a, b in zip(values, values[1:])) > 0.6 * gained:
        return None
    if _kendall_tau(values) < 0.6:
        return None
    return Growth(first, last, usable[-1][0] - usable[0][0])


def _kendall_tau(values: list[int], at_most: int = 200) -> float:
    """Kendall's tau-a of the values against their order (ties count as neither), on at most
    ``at_most`` evenly spaced samples: O(n^2), run once at the end."""
    if len(values) > at_most:
        values = [values[i * len(values) // at_most] for i in range(at_most)]
    n = len(values)
    score = 0
    for i in range(n):
        a = values[i]
        for b in values[i + 1:]:
            score += (b > a) - (b < a)
    return score / (n * (n - 1) / 2)


def check(session: Session) -> None:
    memory = session.memory
    if memory.kind != "cuda-allocated":
        return  # the resident set of a CPU process is too noisy for a growth verdict
    growth = detect_growth(memory.samples)
    if growth is not None:
        session.report(
            "LC602", f"allocated {memory.device} memory grew from {growth.start_bytes >> 20} MiB "
            f"to {growth.end_bytes >> 20} MiB over {growth.steps} steps "
            f"({growth.per_step / (1 << 20):.1f} MiB per step): something keeps tensors "
            "alive across steps", _site(session))


def _site(session: Session) -> Any:
    # a retained loss graph explains the growth; otherwise point at the step boundary
    main = session.main_record()
    return session.retained.oldest_site() or (main.step_site if main else None)
