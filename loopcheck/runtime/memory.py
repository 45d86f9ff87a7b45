"""Device memory at optimizer-step boundaries, from the CUDA caching allocator's host-side
counters (no sync); on a CPU-only run the process's resident set size instead. LC602 looks
for allocated memory that keeps growing from step to step."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session

MAX_SAMPLES = 4096  # beyond this every other sample is dropped and the stride doubles
WARMUP_STEPS = 3  # the first steps allocate optimizer state and workspaces
MIN_SAMPLES = 8
CPU_STRIDE = 8


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


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class MemoryMonitor:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.samples: list[tuple[int, int]] = []
        self.stride = CPU_STRIDE  # reading /proc costs more than the CUDA counter
        self.kind = "cpu-rss"
        self.device: str | None = None
        self.device_index = 0
        self.cuda: Any = None
        self._stats: Any = None

    def install(self) -> None:
        pass

    def _detect_cuda(self) -> None:
        torch = self.session.torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # never initialise it ourselves
            self.cuda = torch.cuda
            self.kind = "cuda-allocated"
            self.device_index = torch.cuda.current_device()
            self.device = f"cuda:{self.device_index}"
            self.samples, self.stride = [], 1
            stats = getattr(torch._C, "_cuda_memoryStats", None)
            self._stats = stats  # the raw nested dict: memory_allocated() flattens it in Python

    def _allocated(self) -> int:
        if self._stats is not None:
            return int(self._stats(self.device_index)["allocated_bytes"]["all"]["current"])
        return int(self.cuda.memory_allocated(self.device_index))

    def on_step(self, step: int) -> None:
        if self.cuda is None and step % 16 == 0:  # CUDA may be initialised late; asking costs
            self._detect_cuda()
        if step % self.stride:
            return
        value = self._allocated() if self.cuda is not None else _rss_bytes()
        if value is None:
            return
        self.samples.append((step, value))
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.stride *= 2

    def peak(self) -> int | None:
        if self.cuda is not None:
            return int(self.cuda.max_memory_allocated(self.device_index))
        return max((v for _, v in self.samples), default=None)

    def finish(self) -> None:
        if self.kind != "cuda-allocated":
            return  # the resident set of a CPU process is too noisy for a growth verdict
        growth = detect_growth(self.samples)
        if growth is not None:
            self.session.report(
                "LC602", f"allocated {self.device} memory grew from {growth.start_bytes >> 20} MiB "
                f"to {growth.end_bytes >> 20} MiB over {growth.steps} steps "
                f"({growth.per_step / (1 << 20):.1f} MiB per step): something keeps tensors "
                "alive across steps", self._site())

    def _site(self) -> Any:
        # a retained loss graph explains the growth; otherwise point at the step boundary
        main = self.session.main_record()
        return self.session.retained.oldest_site() or (main.step_site if main else None)
