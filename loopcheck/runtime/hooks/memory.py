"""Device memory at optimizer-step boundaries, from the CUDA caching allocator's host-side
counters (no sync); on a CPU-only run the process's resident set size instead
(``checks.memory_growth`` decides LC602 from the samples)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

MAX_SAMPLES = 4096  # beyond this every other sample is dropped and the stride doubles
CPU_STRIDE = 8


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
