"""The report's plots, against the optimizer step of the main optimizer.

Each function returns one chart as HTML, or ``None`` when the report holds no data for it (the
page says so instead). Long series are thinned with ``downsample.keep`` (spikes survive).
"""

from __future__ import annotations

from typing import Any

from . import downsample
from .data import Series, backward_histogram, section
from .svg import Chart, Level, Line, Marker, bar_chart, line_chart, number

BUCKETS = 300  # per chart: at most ~3 points per bucket and series, ~1 per 2 px of a 720 px plot
MAX_MARKERS = 200


def mib(value: float) -> str:
    if abs(value) >= 1 << 30:
        return f"{value / (1 << 30):.3g} GiB"
    return f"{value / (1 << 20):.4g} MiB"


def _thin(xs: list[Any], *ys_list: list[Any]) -> tuple[list[Any], list[list[Any]]]:
    keep = downsample.keep(ys_list, BUCKETS)
    return downsample.pick(xs, keep), [downsample.pick(ys, keep) for ys in ys_list]


def _spread(steps: list[int], label: str, css: str) -> list[Marker]:
    """At most ``MAX_MARKERS`` markers, evenly over the run (each one may stand for several)."""
    if len(steps) <= MAX_MARKERS:
        return [Marker(s, f"{label} {s}", css, show_label=False) for s in steps]
    stride = len(steps) / MAX_MARKERS
    return [Marker(steps[int(i * stride)], f"{label} {steps[int(i * stride)]}", css, show_label=False)
            for i in range(MAX_MARKERS)]


def _thinned_note(s: Series) -> str:
    info = s.downsampled
    if isinstance(info, dict) and info.get("total"):
        return (f" The recorder kept {info.get('kept')} of {info.get('total')} steps "
                f"({info.get('method', 'min-max buckets')}); spikes are kept.")
    return ""


def backward_histogram_chart(data: dict[str, Any]) -> str | None:
    histogram = backward_histogram(data)
    if not histogram:
        return None
    total = sum(histogram.values())
    common = max(histogram, key=lambda k: histogram[k])
    desc = (f"{total} optimizer steps; {histogram[common]} of them ({100 * histogram[common] / total:.0f}%) had "
            f"{common} backward pass{'es' if common != 1 else ''}"
            + ("." if len(histogram) == 1 else
               "; others: " + ", ".join(f"{k}: {v}" for k, v in histogram.items() if k != common) + "."))
    bars = [(str(k), v, f"{v} step{'s' if v != 1 else ''} with {k} backward pass{'es' if k != 1 else ''}")
            for k, v in histogram.items()]
    return bar_chart(Chart("chart-backward-histogram", "Backward passes per optimizer step", desc,
                           "backward passes in the step's window", "optimizer steps"), bars)


def backward_over_time_chart(data: dict[str, Any], s: Series) -> str | None:
    if not any(v is not None for v in s.backward_passes):
        return None
    xs, (ys,) = _thin(s.step, s.backward_passes)
    known = [v for v in s.backward_passes if v is not None]
    markers = [Marker(f["first_step"], f"{f['code']} from step {f['first_step']}", "finding")
               for f in data.get("findings") or [] if isinstance(f.get("first_step"), int)]
    diverged = section(data, "distributed", "consistency", "diverged_at_step")
    if isinstance(diverged, int):
        markers.append(Marker(diverged, f"replicas differ from step {diverged}", "diverged"))
    desc = (f"Steps {s.step[0]} to {s.step[-1]}: between {min(known)} and {max(known)} backward passes per step."
            + (" Markers: the step where each finding began." if markers else "") + _thinned_note(s))
    return line_chart(Chart("chart-backward-steps", "Backward passes per step over the run", desc,
                            "optimizer step", "backward passes"),
                      [Line("backward passes", xs, ys)], markers, y_floor=0)


def lr_chart(data: dict[str, Any], s: Series) -> str | None:
    if not any(v is not None for group in s.lr for v in group):
        return None
    xs, groups = _thin(s.step, *s.lr)
    lines = [Line(f"group {g}", xs, ys, f"s{g % 6}") for g, ys in enumerate(groups)]
    markers, x_max = [], None
    for sched in section(data, "counters", "schedulers") or []:
        horizon = sched.get("horizon")
        if isinstance(horizon, (int, float)) and horizon > 0:
            markers.append(Marker(horizon, f"{sched.get('type', 'scheduler')} horizon: step {int(horizon)}", "horizon"))
            x_max = max(x_max or 0, horizon)
    peaks = ", ".join(f"group {g}: peak {number(max(v for v in ys if v is not None))}"
                      for g, ys in enumerate(s.lr) if any(v is not None for v in ys))
    desc = f"Observed learning rate at each optimizer step ({peaks})."
    if markers:
        desc += " The dashed line is the scheduler's horizon: a run that ends far from it, or passes it, " \
                "has a schedule sized for another number of steps."
    return line_chart(Chart("chart-lr", "Learning rate per param group", desc, "optimizer step", "learning rate"),
                      lines, markers, x_max=x_max)


def scale_chart(data: dict[str, Any], s: Series) -> str | None:
    has_scale = any(v is not None for v in s.scale)
    if not has_scale and not s.skipped:
        return None
    xs, (ys,) = _thin(s.step, s.scale) if has_scale else ([], [[]])
    skipped = sorted(s.skipped)
    total = section(data, "counters", "skipped_steps")
    count = total if isinstance(total, int) and total >= len(skipped) else len(skipped)
    desc = (f"{count} step{'s' if count != 1 else ''} skipped by GradScaler (red rules)"
            + (f", the first at step {skipped[0]}" if skipped else "") + ".")
    known = [v for v in s.scale if v is not None]
    if known:
        desc += f" Loss scale from {number(known[0])} to {number(known[-1])} (min {number(min(known))}); log scale."
    else:
        desc += " The scale itself was not readable without a device sync."
    lines = [Line("loss scale", xs, ys)] if has_scale else []
    return line_chart(Chart("chart-scale", "GradScaler loss scale and skipped steps", desc, "optimizer step",
                            "loss scale", log2_y=has_scale),
                      lines, _spread(skipped, "skipped step", "skip"))


def memory_chart(data: dict[str, Any], s: Series) -> str | None:
    if not any(v is not None for v in s.memory_bytes):
        return None
    xs, (ys,) = _thin(s.memory_step, s.memory_bytes)
    known = [v for v in s.memory_bytes if v is not None]
    source = section(data, "memory", "source")
    label = "Allocated device memory" if source == "cuda-allocated" else "Process memory (RSS)"
    levels = []
    peak = section(data, "memory", "peak_bytes")
    if isinstance(peak, int) and peak > 0:
        levels.append(Level(peak, f"peak {mib(peak)}", "peak"))
    capacity = section(data, "memory", "capacity_bytes")
    top = max([*known, peak or 0])
    desc = f"{label} at step boundaries: {mib(known[0])} at step {s.memory_step[0]}, {mib(known[-1])} at step " \
           f"{s.memory_step[-1]}, max {mib(max(known))}."
    if isinstance(peak, int) and peak > 0:
        desc += f" Peak (between steps too): {mib(peak)}."
    if isinstance(capacity, int) and capacity > 0:
        desc += f" Device capacity {mib(capacity)} ({100 * top / capacity:.0f}% used at peak)."
        if top >= capacity / 2:  # drawn only where it does not flatten the curve
            levels.append(Level(capacity, f"capacity {mib(capacity)}", "capacity"))
    device = section(data, "memory", "device")
    unit = float(1 << 30) if top >= 1 << 30 else float(1 << 20)
    return line_chart(Chart("chart-memory", label + (f" on {device}" if device else ""), desc, "optimizer step",
                            "GiB" if unit == 1 << 30 else "MiB", y_format=lambda v: f"{v / unit:g}", y_unit=unit),
                      [Line("memory", xs, ys)], levels=levels, y_floor=0)


_TICK_NAMES = {"optimizer": "optimizer steps", "scheduler": "scheduler steps", "ema": "EMA updates",
               "zero_grad": "zero_grad calls"}


def ticks_chart(data: dict[str, Any], s: Series) -> str | None:
    if not s.ticks:
        return None
    names = [n for n in _TICK_NAMES if n in s.ticks] + [n for n in s.ticks if n not in _TICK_NAMES]
    xs, columns = _thin(s.step, *(s.ticks[n] for n in names))
    lines = [Line(_TICK_NAMES.get(n, n), xs, ys, f"s{i % 6}") for i, (n, ys) in enumerate(zip(names, columns))]
    counters = data.get("counters") or {}
    attempts = int(counters.get("optimizer_steps") or 0) + int(counters.get("skipped_steps") or 0)
    totals = {"scheduler": sum(int(x.get("steps") or 0) for x in counters.get("schedulers") or []),
              "ema": sum(int(x.get("updates") or 0) for x in counters.get("ema") or []),
              "zero_grad": int(counters.get("zero_grad_calls") or 0)}
    rates = [f"{_TICK_NAMES[n]} {totals[n] / attempts:.2f} per optimizer step" for n in names
             if n in totals and attempts] if attempts else []
    desc = ("Cumulative counts: each should grow once per optimizer step (a steeper line ticks per "
            "micro-batch, a flat one never ticks)." + (" Over the whole run: " + "; ".join(rates) + "." if rates else ""))
    return line_chart(Chart("chart-ticks", "Optimizer, scheduler and EMA ticks", desc, "optimizer step", "count"),
                      lines, y_floor=0)


def ranks_chart(data: dict[str, Any]) -> str | None:
    steps = section(data, "distributed", "optimizer_steps_per_rank")
    if not isinstance(steps, dict) or len(steps) < 2:
        return None
    values = {int(r): int(n) for r, n in steps.items()}
    agree = len(set(values.values())) == 1
    desc = (f"Every rank took {next(iter(values.values()))} optimizer steps." if agree else
            "The ranks disagree: " + ", ".join(f"rank {r} {n}" for r, n in sorted(values.items())) + ".")
    bars = [(f"rank {r}", n, f"rank {r}: {n} optimizer steps") for r, n in sorted(values.items())]
    return bar_chart(Chart("chart-ranks", "Optimizer steps per rank", desc, "rank", "optimizer steps"), bars,
                     "s0" if agree else "s3")
