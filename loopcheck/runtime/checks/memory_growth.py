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
    """Steady growth: after warm-up, memory rises in at least 3 of 4 step-to-step deltas, never
    falls back to where it started, and gains at least ``min_total`` bytes and 5% overall."""
    usable = [s for s in samples if s[0] > WARMUP_STEPS]
    if len(usable) < MIN_SAMPLES:
        return None
    values = [v for _, v in usable]
    rises = sum(b > a for a, b in zip(values, values[1:]))
    first, last = values[0], values[-1]
    gained = last - first
    if rises * 4 < (len(values) - 1) * 3 or min(values[1:]) <= first:
        return None
    if gained < min_total or gained < 0.05 * max(first, 1):
        return None
    return Growth(first, last, usable[-1][0] - usable[0][0])



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
