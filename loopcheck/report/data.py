"""A runtime report (``loopcheck-runtime-report/1`` or ``/2``) read for presentation.

Everything here accepts missing keys and ``null``s: reports of older versions, runs without a
scaler, without memory samples or without a ``series`` section. ``Series`` is the per-step data
of the main optimizer (``series`` of schema 2); for a schema-1 report it is rebuilt from what
that schema has (memory samples per step, nothing else per step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ReportError(ValueError):
    """The file is not a loopcheck runtime report (one line for the user)."""


def load(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("loopcheck-runtime-report/"):
        raise ReportError(f"{path} is not a loopcheck runtime report (no 'schema': 'loopcheck-runtime-report/N')")
    return data


def section(data: dict[str, Any], *keys: str) -> Any:
    """``data[k1][k2]...`` or ``None`` where a level is missing or not a dict."""
    value: Any = data
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


@dataclass
class Series:
    """Columnar per-step samples; every list has the length of ``step`` except ``skipped`` and
    the memory pair, which has its own steps in a schema-1 report."""

    step: list[int] = field(default_factory=list)
    backward_passes: list[int | None] = field(default_factory=list)
    lr: list[list[float | None]] = field(default_factory=list)  # per param group: one value per step
    scale: list[float | None] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    memory_step: list[int] = field(default_factory=list)
    memory_bytes: list[int | None] = field(default_factory=list)
    ticks: dict[str, list[int]] = field(default_factory=dict)
    downsampled: dict[str, Any] | None = None

    @property
    def has_steps(self) -> bool:
        return bool(self.step)


def series(data: dict[str, Any]) -> Series:
    raw = data.get("series")
    s = _from_series(raw) if isinstance(raw, dict) and isinstance(raw.get("step"), list) else Series()
    if not s.memory_step:  # schema 1, or a series without memory: the sampled memory of "memory"
        memory = [m for m in section(data, "memory", "per_step") or [] if isinstance(m, dict)]
        s.memory_step = [int(m.get("step", i)) for i, m in enumerate(memory)]
        s.memory_bytes = [m.get("bytes") for m in memory]
    return s


def _from_series(raw: dict[str, Any]) -> Series:
    steps = [int(s) for s in raw["step"]]
    n = len(steps)

    def column(name: str) -> list[Any]:
        values = raw.get(name)
        return list(values[:n]) + [None] * (n - len(values)) if isinstance(values, list) else []

    lr_rows = column("lr")
    groups = max((len(row) for row in lr_rows if isinstance(row, list)), default=0)
    lr = [[row[g] if isinstance(row, list) and g < len(row) else None for row in lr_rows] for g in range(groups)]
    ticks = {name: list(values) for name, values in (raw.get("ticks") or {}).items()
             if isinstance(values, list) and len(values) == n and any(values)}
    # memory is sampled (every step at first, then every k-th): only the sampled steps are points
    memory = [(step, m) for step, m in zip(steps, column("memory_bytes")) if m is not None]
    return Series(step=steps, backward_passes=column("backward_passes"), lr=lr, scale=column("scale"),
                  skipped=[int(s) for s in raw.get("skipped") or []],
                  memory_step=[step for step, _ in memory], memory_bytes=[m for _, m in memory],
                  ticks=ticks, downsampled=raw.get("downsampled") or None)


def main_optimizer(data: dict[str, Any]) -> dict[str, Any] | None:
    optimizers = data.get("optimizers") or []
    index = section(data, "series", "optimizer")
    for opt in optimizers:
        if index is not None and opt.get("index") == index:
            return opt
    return max(optimizers, key=lambda o: o.get("steps", 0) + o.get("skipped_steps", 0), default=None)


def backward_histogram(data: dict[str, Any]) -> dict[int, int]:
    """``{backward passes in a window: optimizer steps}`` of the main optimizer (exact counts,
    not the downsampled series)."""
    opt = main_optimizer(data)
    raw = (opt or {}).get("backward_per_step") or section(data, "counters", "backward_per_step") or {}
    return {int(k): int(v) for k, v in sorted(raw.items(), key=lambda kv: int(kv[0]))}


def effective_batch(data: dict[str, Any]) -> dict[str, Any] | None:
    batch = section(data, "distributed", "effective_batch")
    return batch if isinstance(batch, dict) and batch.get("backward_per_step") else None


def world_size(data: dict[str, Any]) -> int:
    return int(section(data, "distributed", "world_size") or section(data, "environment", "world_size") or 1)


def verdict(data: dict[str, Any]) -> tuple[str, str]:
    """``(level, sentence)``: level is the worst severity found, ``clean``, or ``problem`` when only
    cross-rank problems were found."""
    findings = data.get("findings") or []
    problems = section(data, "distributed", "problems") or []
    by_level = {level: sum(f.get("severity") == level for f in findings) for level in ("error", "warning", "info")}
    parts = [f"{n} {level}{'s' if n != 1 else ''}" for level, n in by_level.items() if n]
    if problems:
        parts.append(f"{len(problems)} cross-rank problem{'s' if len(problems) != 1 else ''}")
    if not parts:
        return "clean", "No findings"
    worst = next((level for level in ("error", "warning", "info") if by_level[level]), "problem")
    n = len(findings)
    head = f"{n} finding{'s' if n != 1 else ''}" if findings else "No findings"
    return worst, f"{head}: {', '.join(parts)}"
