"""Device memory at optimizer-step boundaries, from the CUDA caching allocator's host-side
counters (no sync); on a CPU-only run the process's resident set size instead
(``checks.memory_growth`` decides LC602 from the samples)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

MAX_SAMPLES = 4096  # beyond this every other sample is dropped and the stride doubles
DENSE_STEPS = 64  # every step is sampled up to here (short runs, the first epoch's shape)
CPU_STRIDE = 8  # then every 8th step: reading /proc costs more than the CUDA counter
CUDA_STRIDE = 4  # the allocator's statistics come as a nested dict built per call


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
        self.stride = CPU_STRIDE
        self.kind = "cpu-rss"
        self.device: str | None = None
        self.device_index = 0
        self.cuda: Any = None
        self._stats: Any = None
        self._torch_cuda: Any = None

    def install(self) -> None:
        self._torch_cuda = self.session.torch.cuda
        self._detect_cuda()  # watch() may start after the script initialised CUDA

    def _cuda_started(self) -> bool:
        """Whether the script has initialised CUDA (loopcheck never does). ``torch.cuda``'s
        module flag is one attribute read, so it is asked at every step: the first step after
        CUDA came up is sampled on the device."""
        cuda = self._torch_cuda
        started = getattr(cuda, "_initialized", None)
        if started is None:  # a torch without the flag: the public function
            return bool(cuda.is_initialized())
        return bool(started) and cuda.is_initialized()

    def _detect_cuda(self) -> None:
        if not self._cuda_started():  # never initialise it ourselves
            return
        cuda = self._torch_cuda
        self.cuda = cuda
        self.kind = "cuda-allocated"
        self.device_index = cuda.current_device()
        self.device = f"cuda:{self.device_index}"
        self.samples, self.stride = [], CUDA_STRIDE
        stats = getattr(self.session.torch._C, "_cuda_memoryStats", None)
        self._stats = stats  # the raw nested dict: memory_allocated() flattens it in Python

    def _allocated(self) -> int:
        if self._stats is not None:
            return int(self._stats(self.device_index)["allocated_bytes"]["all"]["current"])
        return int(self.cuda.memory_allocated(self.device_index))

    def on_step(self, step: int) -> int | None:
        """Sample at the boundary after optimizer step ``step`` (1-based); the value or None."""
        if self.cuda is None and self._cuda_started():
            self._detect_cuda()
        if step > DENSE_STEPS and step % self.stride:
            return None
        value = self._allocated() if self.cuda is not None else _rss_bytes()
        if value is None:
            return None
        self.samples.append((step, value))
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.stride *= 2
        return value

    def peak(self) -> int | None:
        if self.cuda is not None:
            return int(self.cuda.max_memory_allocated(self.device_index))
        return max((v for _, v in self.samples), default=None)

    def capacity(self) -> int | None:
        if self.cuda is not None:
            return int(self._torch_cuda.get_device_properties(self.device_index).total_memory)
        return None
