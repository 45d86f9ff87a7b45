"""The human summary printed to stderr at exit, rendered from the report's data."""
from __future__ import annotations

import linecache
import os
from typing import Any

PREFIX = "loopcheck:"


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / (1 << 20):.1f} MiB"


def _rel(path: str | None) -> str:
    if not path:
        return "<unknown>"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def render_summary(data: dict[str, Any], quiet: bool = False) -> str:
    lines: list[str] = []
    counters = data["counters"]
    steps = counters["optimizer_steps"]
    if not quiet:
        per = ", ".join(f"{n} x{count}" for n, count in counters["backward_per_step"].items())
        skipped = f" ({counters['skipped_steps']} skipped by GradScaler)" if counters["skipped_steps"] else ""
        lines.append(f"{PREFIX} {steps} optimizer steps{skipped}, {counters['backward_passes']} "
                     f"backward passes" + (f"; backward passes per step: {per}" if per else ""))
        for optimizer in data["optimizers"]:
            lines.append(f"{PREFIX}   optimizer {optimizer['index']} {optimizer['type']}: "
                         f"{optimizer['steps']} steps, {optimizer['skipped_steps']} skipped, "
                         f"{optimizer['backward_passes']} backward passes")
        attempts = max(steps + counters["skipped_steps"], 1)

        def per_step(count: int) -> str:
            return f"{count} ({count / attempts:.2f} per optimizer step)"

        extra = [f"{s['type']} steps {per_step(s['steps'])}" for s in counters["schedulers"]]
        extra += [f"{e['type']} updates {per_step(e['updates'])}" for e in counters["ema"]]
        scaler = counters["grad_scaler"]
        if scaler["step"]:
            extra.append(f"GradScaler steps {per_step(scaler['step'])}, updates {per_step(scaler['update'])}")
        for item in extra:
            lines.append(f"{PREFIX}   {item}")
        memory = data["memory"]
        if memory["per_step"]:
            first, last = memory["per_step"][0]["bytes"], memory["per_step"][-1]["bytes"]
            label = "allocated" if memory["source"] == "cuda-allocated" else "resident (RSS)"
            lines.append(f"{PREFIX}   memory {label} at step boundaries: {_mib(first)} -> "
                         f"{_mib(last)}, peak {_mib(memory['peak_bytes'])}"
                         + (f" on {memory['device']}" if memory["device"] else ""))
        for error in data["disabled_checks"]:
            lines.append(f"{PREFIX}   disabled after an internal error: {error}")
    # rank, effective batch and cross-rank problems of a distributed run (output/merge.py)
    from .merge import ranks_label, summary_lines

    lines += summary_lines(data, quiet)
    world = (data.get("distributed") or {}).get("world_size") or 1
    findings = data["findings"]
    if findings or not quiet:
        lines.append(f"{PREFIX} {len(findings)} finding{'s' if len(findings) != 1 else ''}")
    for f in findings:
        where = f"{_rel(f['file'])}:{f['line']}" if f["line"] else _rel(f["file"])
        if f.get("sampled"):
            count = f" (in {f['count']} sampled window{'s' if f['count'] > 1 else ''})"
        else:
            count = f" (x{f['count']})" if f["count"] > 1 else ""
        lines.append(f"  {where}: {f['code']} [{f['name']}] {f['severity']}: {f['message']}"
                     f"{count}, first at step {f['first_step']}{ranks_label(f, world)}")
        code = linecache.getline(f["file"], f["line"]).strip() if f["file"] and f["line"] else ""
        if code:
            lines.append(f"      {f['line']} | {code}")
    return "".join(line + "\n" for line in lines)
