"""The human summary printed to stderr at exit, rendered from the report's data."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loopcheck.terminal import PLAIN, Style

PREFIX = "loopcheck:"
_NO_COUNTERS: dict[str, Any] = {"optimizer_steps": 0, "skipped_steps": 0, "backward_passes": 0,
                                "backward_per_step": {}, "schedulers": [], "ema": [], "grad_scaler": {}}


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / (1 << 20):.1f} MiB"


def render_summary(data: dict[str, Any], quiet: bool = False, style: Style = PLAIN,
                   charts: Sequence[str] = ()) -> str:
    """``style``: colours of the findings; ``charts``: terminal chart lines (``report show``)."""
    lines: list[str] = []
    counters = {**_NO_COUNTERS, **(data.get("counters") or {})}
    steps = counters["optimizer_steps"]
    if not quiet:
        per = ", ".join(f"{n} x{count}" for n, count in counters["backward_per_step"].items())
        skipped = f" ({counters['skipped_steps']} skipped by GradScaler)" if counters["skipped_steps"] else ""
        lines.append(f"{PREFIX} {steps} optimizer steps{skipped}, {counters['backward_passes']} "
                     f"backward passes" + (f"; backward passes per step: {per}" if per else ""))
        for optimizer in data.get("optimizers") or []:
            lines.append(f"{PREFIX}   optimizer {optimizer['index']} {optimizer['type']}: "
                         f"{optimizer['steps']} steps, {optimizer['skipped_steps']} skipped, "
                         f"{optimizer['backward_passes']} backward passes")
        attempts = max(steps + counters["skipped_steps"], 1)

        def per_step(count: int) -> str:
            return f"{count} ({count / attempts:.2f} per optimizer step)"

        extra = [f"{s['type']} steps {per_step(s['steps'])}" for s in counters["schedulers"]]
        extra += [f"{e['type']} updates {per_step(e['updates'])}" for e in counters["ema"]]
        scaler = counters["grad_scaler"]
        if scaler.get("step") and scaler.get("enabled", True):
            extra.append(f"GradScaler steps {per_step(scaler['step'])}, updates {per_step(scaler['update'])}")
        elif scaler.get("step"):
            extra.append(f"GradScaler disabled (enabled=False): {scaler['step']} steps passed straight through")
        for item in extra:
            lines.append(f"{PREFIX}   {item}")
        memory = data.get("memory") or {}
        if memory.get("per_step"):
            first, last = memory["per_step"][0]["bytes"], memory["per_step"][-1]["bytes"]
            label = "allocated" if memory.get("source") == "cuda-allocated" else "resident (RSS)"
            lines.append(f"{PREFIX}   memory {label} at step boundaries: {_mib(first)} -> "
                         f"{_mib(last)}, peak {_mib(memory.get('peak_bytes'))}"
                         + (f" on {memory['device']}" if memory.get("device") else ""))
        for error in data.get("disabled_checks") or []:
            lines.append(f"{PREFIX}   disabled after an internal error: {error}")
    # rank, effective batch and cross-rank problems of a distributed run (output/merge.py)
    from .merge import summary_lines

    lines += summary_lines(data, quiet)
    lines += charts
    for item in data.get("not_checked") or []:
        lines.append(f"{PREFIX} not checked: {item}")
    # findings in `loopcheck check`'s layout, each with how often and from which step
    from loopcheck.report.show import findings_lines

    lines += findings_lines(data, quiet, style)
    return "".join(line + "\n" for line in lines)
