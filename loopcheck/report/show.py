"""The findings and charts of a runtime report as text, for the end of ``loopcheck run`` and for
``loopcheck report show``: findings in ``loopcheck check``'s layout (``path:line:col: CODE
message``, the source line, a caret), each followed by how often and from which optimizer step.
"""

from __future__ import annotations

from typing import Any

from loopcheck.terminal import PLAIN, Style

from . import terminal_chart
from .data import series, world_size
from .findings import occurrence, to_finding

PREFIX = "loopcheck:"


def findings_lines(data: dict[str, Any], quiet: bool = False, style: Style = PLAIN) -> list[str]:
    from loopcheck.output import render

    findings = data.get("findings") or []
    lines = []
    if findings or not quiet:
        lines.append(f"{PREFIX} {len(findings)} finding{'s' if len(findings) != 1 else ''}")
    world = world_size(data)
    for raw in findings:
        text = render([to_finding(raw)], "text", style=style)
        head, _, rest = text.partition("\n")
        lines.append(head + style.dim(f" ({occurrence(raw, world)})"))
        lines += rest.splitlines()
    return lines


def chart_lines(data: dict[str, Any], width: int = 80, unicode: bool = True) -> list[str]:
    """Backward passes per step over the run and memory per step, one line each (the summary's
    first line has the distribution); nothing for a report without per-step data."""
    s = series(data)
    lines = []
    room = max(10, width - 48)
    known = [v for v in s.backward_passes if v is not None]
    if known:
        line = terminal_chart.sparkline(s.backward_passes, room, unicode, floor=0)
        lines.append(f"{PREFIX}   {'backward passes over steps':<27}{line} max {max(known)} "
                     f"(steps {s.step[0]}-{s.step[-1]})")
    memory = [v for v in s.memory_bytes if v is not None]
    if len(memory) > 1:
        line = terminal_chart.sparkline(s.memory_bytes, room, unicode)
        lines.append(f"{PREFIX}   {'memory over steps':<27}{line} {_size(memory[0])} -> {_size(memory[-1])}, "
                     f"max {_size(max(memory))}")
    return lines


def _size(value: float) -> str:
    return f"{value / (1 << 30):.2f} GiB" if value >= 1 << 30 else f"{value / (1 << 20):.1f} MiB"
