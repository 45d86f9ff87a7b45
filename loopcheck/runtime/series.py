"""Per-step series of one optimizer (the report's ``series`` section; shape in REPORT.md).

One row per optimizer step, appended on the host when the step's window closes: the step
number, the backward passes of the window, the learning rate of each param group as read from
``param_groups`` (Python numbers; a tensor LR on a device is not read), the GradScaler scale
where it is known without a sync, the memory sample of that step boundary and the cumulative
counts of optimizer steps, scheduler steps, EMA updates and ``zero_grad`` calls.

Past ``LIMIT`` rows the series keeps bounded memory: rows are grouped into buckets of
consecutive steps and each bucket keeps its first row and the rows holding the minimum and the
maximum of the backward passes, the memory and the first group's LR, so spikes survive. When
the kept rows exceed ``LIMIT`` again, the bucket width doubles (the extremes of two buckets are
among the extremes each kept, so this is exact)."""
from __future__ import annotations

from typing import Any

LIMIT = 20_000  # rows kept before downsampling
SKIPPED_LIMIT = 10_000

# row layout: (step, backward_passes, lr, scale, memory, optimizer, scheduler, ema, zero_grad)
STEP, BACKWARD, LR, SCALE, MEMORY = 0, 1, 2, 3, 4
_TICKS = ("optimizer", "scheduler", "ema", "zero_grad")


def read_lrs(groups: list[dict[str, Any]], last: list[float | None] | None) -> list[float | None]:
    """The LR of each param group; ``last`` itself when nothing changed (no list per step).
    A tensor LR is read only on the CPU: reading one on a device would synchronise."""
    if last is not None and len(last) == len(groups):
        for group, seen in zip(groups, last):
            lr = group["lr"]
            if type(lr) is not float or lr != seen:
                break
        else:
            return last
    return [_lr_value(group["lr"]) for group in groups]


def _lr_value(lr: Any) -> float | None:
    if isinstance(lr, (int, float)):
        return float(lr)
    if getattr(lr, "is_cpu", False) and lr.numel() == 1:
        return float(lr)
    return None


def _select(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A bucket's first row and the rows with the min and max of the backward passes, the
    memory and the first group's LR, in step order."""
    keep = {0}
    for column in (BACKWARD, MEMORY):
        values = [(row[column], i) for i, row in enumerate(rows) if row[column] is not None]
        if values:
            keep.add(min(values)[1])
            keep.add(max(values)[1])
    lrs = [(row[LR][0], i) for i, row in enumerate(rows) if row[LR] and row[LR][0] is not None]
    if lrs:
        keep.add(min(lrs)[1])
        keep.add(max(lrs)[1])
    return [rows[i] for i in sorted(keep)]


class Series:
    __slots__ = ("bucket", "pending", "rows", "skipped", "total")

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.bucket = 1  # steps per bucket; 1 until LIMIT rows were recorded
        self.pending: list[tuple[Any, ...]] = []  # rows of the bucket being filled
        self.total = 0
        self.skipped: list[int] = []

    def add(self, row: tuple[Any, ...]) -> None:
        self.total += 1
        if self.bucket == 1:
            self.rows.append(row)
            if len(self.rows) > LIMIT:
                self._coarsen()
            return
        pending = self.pending
        if pending and row[STEP] // self.bucket != pending[0][STEP] // self.bucket:
            self.rows += _select(pending)
            pending.clear()
            if len(self.rows) > LIMIT:
                self._coarsen()
        pending.append(row)

    def _coarsen(self) -> None:
        self.bucket *= 2
        width, rows, kept = self.bucket, self.rows, []
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i][STEP] // width != rows[start][STEP] // width:
                kept += _select(rows[start:i])
                start = i
        self.rows = kept
        if len(kept) > LIMIT:  # every bucket kept more than half its rows: widen again
            self._coarsen()

    def as_json(self, optimizer: int) -> dict[str, Any]:
        rows = self.rows + (_select(self.pending) if self.pending else [])
        columns = list(zip(*rows)) if rows else [()] * 9
        data: dict[str, Any] = {
            "optimizer": optimizer,
            "step": list(columns[STEP]),
            "backward_passes": list(columns[BACKWARD]),
            "lr": [list(lrs) for lrs in columns[LR]],
            "scale": list(columns[SCALE]),
            "skipped": list(self.skipped),
            "memory_bytes": list(columns[MEMORY]),
            "ticks": {name: list(columns[5 + i]) for i, name in enumerate(_TICKS)},
            "downsampled": False if self.bucket == 1 else
            {"method": "min-max buckets", "kept": len(rows), "total": self.total},
        }
        return data

    def note_skipped(self, step: int) -> None:
        if len(self.skipped) < SKIPPED_LIMIT:
            self.skipped.append(step)
