"""The JSON report (schema in REPORT.md), written atomically: a temporary file in the same
directory, flushed and fsynced, then ``os.replace``d over the target."""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

SCHEMA = "loopcheck-runtime-report/2"


def build_report(session: Session) -> dict[str, Any]:
    per_step: Counter[int] = Counter()
    for record in session.records:
        per_step.update(record.passes)
    memory = session.memory
    main = session.main_record()
    active = [r for r in session.records if r.active]
    return {
        "schema": SCHEMA,
        "command": session.command,
        "exit": session.exit_status,
        "duration_s": round(time.monotonic() - session.started_at, 3),
        "findings": [f.as_json() for f in session.findings.all()],
        "counters": {
            "optimizer_steps": sum(r.steps for r in session.records),
            "skipped_steps": sum(r.skipped for r in session.records),
            "backward_passes": session.tracker.seq,
            "backward_per_step": {str(k): v for k, v in sorted(per_step.items())},
            "zero_grad_calls": session.zero_grad_calls,
            "clip_calls": session.clip_calls,
            "schedulers": [{"type": s.kind, "steps": s.steps, "horizon": s.horizon}
                           for s in session.schedulers.all],
            "ema": [{"type": e.kind, "updates": e.updates} for e in session.emas.all],
            "grad_scaler": dict(session.scalers.calls, enabled=session.scalers.enabled_seen
                                or not session.scalers.disabled_seen),
        },
        "memory": {
            "source": memory.kind,
            "device": memory.device,
            "peak_bytes": memory.peak(),
            "capacity_bytes": memory.capacity(),
            "stride": memory.stride,
            "per_step": [{"step": step, "bytes": value} for step, value in memory.samples],
        },
        "optimizers": [r.as_json() for r in active],
        "series": main.series.as_json(active.index(main)) if main in active else None,
        "environment": _environment(session),
        "disabled_checks": list(session.guard.errors),
        "not_checked": not_checked(session),
    }


# what needs an optimizer step to be decided: the window, scheduler, EMA, DDP and memory checks
_NEEDS_STEPS = "LC101-LC113, LC201-LC204, LC207, LC301-LC306, LC401, LC402, LC501, LC502, LC601, LC602, LC605"


def not_checked(session: Session) -> list[str]:
    """Checks that could not run, and why (a run with no optimizer step checks next to nothing)."""
    if any(r.steps or r.skipped for r in session.records):
        return []
    backward = session.tracker.seq
    if backward:
        why = (f"{backward} backward pass{'es' if backward > 1 else ''} but no optimizer step: the "
               "parameters were updated by hand (manual SGD) or by an optimizer that is not a "
               "torch.optim.Optimizer")
    else:
        why = "no backward pass and no optimizer step ran while loopcheck was watching"
    return [f"{_NEEDS_STEPS}: {why}"]


def _environment(session: Session) -> dict[str, Any]:
    torch = session.torch
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    device = session.memory.device or "cpu"
    name = None
    if session.memory.cuda is not None:
        name = torch.cuda.get_device_name()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": sys.platform,
        "device": device,
        "device_name": name,
        "cuda_available": torch.cuda.is_available(),
        "world_size": torch.distributed.get_world_size() if distributed
        else int(os.environ.get("WORLD_SIZE", "1")),
    }


def write_report_atomically(path: str, data: dict[str, Any]) -> None:
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".loopcheck-", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
