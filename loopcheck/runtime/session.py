"""One runtime session: installs every hook (all handles in one ExitStack), routes events
to the checks, and produces the summary and the report when it stops.

Importing this module does not import torch; ``Session.start`` does."""
from __future__ import annotations

import sys
import time
import weakref
from contextlib import ExitStack
from typing import Any

from loopcheck.report.outputs import Outputs, presents

from . import callsite, step_site
from .callsite import Site, user_site
from .checks import lr_trajectory, window_checks
from .findings import FindingLog
from .guard import Guard
from .imports import PostImportHooks
from .selection import Selection
from .state import BackwardInfo, OptimizerRecord

_active: Session | None = None


def active_session() -> Session | None:
    return _active


class Session:
    def __init__(self, selection: Selection | None = None, lr_scaling: Any = None) -> None:
        self.findings = FindingLog(selection or Selection.parse())
        self.lr_scaling = lr_scaling  # loopcheck.config.LrScaling from [tool.loopcheck.lr-scaling]
        self.guard = Guard()
        self.stack = ExitStack()
        self.records: list[OptimizerRecord] = []
        self._by_optimizer: weakref.WeakKeyDictionary[Any, OptimizerRecord] = weakref.WeakKeyDictionary()
        self._last_record: OptimizerRecord | None = None  # record_for's answer for the last optimizer
        self.param_owner: dict[int, OptimizerRecord] = {}
        self.last_zero_site: Site | None = None
        self.zero_grad_calls = 0
        self.steps_running = 0  # optimizer steps between their pre- and post-hook
        self.windows_closed = 0
        self.clip_calls = 0
        self.started_at = 0.0
        self.stopped = False
        self.exit_status: dict[str, Any] = {"how": "running", "code": None}
        self.command: list[str] | None = None  # how `loopcheck run` was started (report header)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> Session:
        global _active
        if _active is not None:
            raise RuntimeError("a loopcheck runtime session is already active")
        import torch  # the session is where torch gets imported, never earlier

        from .checks.retained_graph import RetainedGraphs
        from .hooks.accelerate import AccelerateHooks
        from .hooks.autocast import AutocastHooks
        from .hooks.backward import GradTracker
        from .hooks.clip import ClipHooks
        from .hooks.data import DataHooks
        from .hooks.ema import EmaHooks
        from .hooks.memory import MemoryMonitor
        from .hooks.mode import ModeHooks
        from .hooks.optimizer import OptimizerHooks
        from .hooks.scaler import ScalerHooks
        from .hooks.scheduler import SchedulerHooks

        self.torch = torch
        callsite.refresh()
        step_site.forget()
        self.imports = PostImportHooks(on_error=self.guard.fail)  # third-party classes, on import
        self.imports.install()
        self.stack.callback(self.imports.remove)
        self.started_at = time.monotonic()
        self.tracker = GradTracker(self)
        self.data = DataHooks(self)
        self.optimizers = OptimizerHooks(self)
        self.scalers = ScalerHooks(self)
        self.schedulers = SchedulerHooks(self)
        self.clips = ClipHooks(self)
        self.emas = EmaHooks(self)
        self.modes = ModeHooks(self)
        self.autocast = AutocastHooks(self)
        self.memory = MemoryMonitor(self)
        self.retained = RetainedGraphs(self)
        self.accelerate = AccelerateHooks(self)
        from .hooks.distributed import DistributedHooks  # ranks, DDP sync, per-rank parts

        self.dist = DistributedHooks(self)
        self.stack.callback(self._forget_params)
        for part in (self.tracker, self.data, self.optimizers, self.scalers, self.schedulers,
                     self.clips, self.emas, self.modes, self.autocast, self.memory, self.accelerate,
                     self.dist):
            self.guard.call(type(part).__name__, part.install)
        _active = self
        return self

    def stop(self, how: str = "finished", code: int | None = None) -> None:
        """Run the end-of-run checks and remove everything that was installed. Idempotent."""
        global _active
        if self.stopped:
            return
        self.stopped = True
        self.exit_status = {"how": how, "code": code}
        from .checks import finalize

        self.guard.call("end-of-run checks", finalize.run, self)
        self.guard.call("DDP tracking", self.dist.finish)  # LC503, pending samples
        try:
            self.stack.close()
        finally:
            if _active is self:
                _active = None

    def _forget_params(self) -> None:
        for record in self.records:
            record.probes.clear()
        self.param_owner.clear()

    # -- shared helpers ----------------------------------------------------------------
    def step_index(self) -> int:
        records = self.records
        if len(records) == 1:  # the usual case, on every step
            return records[0].steps + records[0].skipped
        return max((r.steps + r.skipped for r in records), default=0)

    def report(self, code: str, message: str, site: Site | None, step: int | None = None,
               sampled: bool = False) -> None:
        self.findings.add(code, message, site, self.step_index() if step is None else step, sampled)

    def record_for(self, optimizer: Any, create: bool = True) -> OptimizerRecord | None:
        last = self._last_record
        if last is not None and last.ref() is optimizer:  # several calls per step, same optimizer
            return last
        record = self._by_optimizer.get(optimizer)  # a weak dictionary's get is Python code
        if record is None and create:
            record = OptimizerRecord(weakref.ref(optimizer), len(self.records),
                                     type(optimizer).__name__, user_site())
            record.fused = bool(getattr(optimizer, "defaults", {}).get("fused"))
            self.records.append(record)
            self._by_optimizer[optimizer] = record
        if record is not None:
            self._last_record = record
        return record

    def main_record(self) -> OptimizerRecord | None:
        """The optimizer that stepped most: memory and graph checks sample at its steps."""
        return max(self.records, key=lambda r: r.steps + r.skipped, default=None)

    # -- events ---------------------------------------------------------------------
    def on_backward_reached(self, record: OptimizerRecord, info: BackwardInfo) -> None:
        """``info`` changed gradients of ``record``'s parameters (called after the backward)."""
        record.total_backwards += 1
        info.targets += 1
        window = record.window
        if window.clip_before_backward is not None:
            self.report("LC107", "gradients are clipped before backward(): the clip sees no "
                        "gradients of this step (None or zero after zero_grad), so clipping is "
                        "off; clip after backward, right before the step", window.clip_before_backward)
            window.clip_before_backward = None
        if info.in_step and not (window.entries and not window.in_step_backwards):
            window.in_step_backwards += 1
            window.closure_zeroed = None
            if record.pending_added and window.closure_added is None:
                window.closure_added = info.site
            return
        # outside the step, or the first closure pass of a window that has micro-batches: the
        # window's last micro-batch, run by the step's closure (Lightning under accumulation)
        first = not window.entries
        optimizer = record.ref()
        groups = optimizer.param_groups if optimizer is not None else None
        lr = groups[0]["lr"] if groups else None
        if type(lr) is float:  # written by hand between micro-batches? (a device tensor is not read)
            if first:
                window.lr = lr
            elif lr != window.lr:
                window.lr = lr
                window.lr_changes += 1
                if record.lr_locator is None:
                    lr_trajectory.changed_in_window(record, window)
        window.entries.append((info, record.pending_reset and not first))
        if record.pending_reset and not first:
            window.reset_site = window.reset_site or self.last_zero_site
            window.resets.append((len(window.entries) - 1, self.last_zero_site))
            if window.carried:
                window.reset_after_carry = True
        if first and record.pending_carry:
            window.carried = True
        window.zeroed_after_backward = window.closure_zeroed = None
        if window.clip_site is not None and not first:
            self.report("LC107", "gradients were clipped before the window's last micro-batch: "
                        "the clip saw a partial sum; clip once, right before the step",
                        window.clip_site)
        window.clip_site = None

    def close_window(self, record: OptimizerRecord, skipped: bool) -> None:
        self.guard.call("DDP tracking", self.dist.on_window_closed, record)  # LC501/LC502
        window_checks.close(self, record, skipped)

    # -- output -----------------------------------------------------------------------
    def write_outputs(self, outputs: Outputs) -> None:
        """Write the JSON report and present the run (``loopcheck.report.outputs``)."""
        from .output.parts import outputs as distributed_outputs
        from .output.report import build_report, write_report_atomically

        data = build_report(self)
        report_path, print_summary = outputs.report, outputs.summary
        # adds the "distributed" section; under torchrun each rank writes its part
        # (r.rankN.json) and rank 0 gets the merged report back to write and present here
        merged = self.guard.call("distributed report", distributed_outputs, self.dist, data, report_path,
                                 print_summary)
        if merged is not None:
            data, report_path, print_summary = merged
        if report_path:
            try:
                write_report_atomically(report_path, data)
            except OSError as exc:
                print(f"loopcheck: could not write the report to {report_path}: {exc}", file=sys.stderr)
        if presents(data):
            outputs.present(data, print_summary)
