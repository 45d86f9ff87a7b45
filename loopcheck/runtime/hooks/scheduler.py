"""LR schedulers have no hooks: ``LRScheduler.step`` (and the subclasses that override it)
is wrapped at class level; nested calls (SequentialLR, ChainedScheduler) count once."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..patching import call_with_user_warnings, replace_attr

if TYPE_CHECKING:
    from ..session import Session

# attribute holding the horizon, per scheduler class: stepping past it means the horizon was
# counted in other units than the stepping (epochs vs batches, micro-batches vs steps)
_HORIZONS = {"CosineAnnealingLR": "T_max", "OneCycleLR": "total_steps", "PolynomialLR": "total_iters"}


@dataclass
class SchedulerRecord:
    kind: str
    steps: int = 0
    window: int = -1  # optimizer window of the last step
    in_window: int = 0  # steps within that window
    site: Site | None = None
    early_site: Site | None = None  # stepped before its optimizer: LC302 unless it is LC301
    owner: Any = None  # the OptimizerRecord of its optimizer
    horizon: int | None = None  # read at each step: the scheduler may be gone by the end
    position: int = 0  # last_epoch after its latest step  # stepped before its optimizer: LC302 unless it is LC301


@dataclass
class WriterRecord:
    """A third-party scheduler (timm's) that writes ``param_groups`` itself."""
    kind: str
    owner: Any  # the OptimizerRecord of its optimizer
    start: float | None  # the LR its constructor left: the schedule's first value
    advanced_site: Site | None = None  # a call before the optimizer's first step that moved the LR
    method: str = ""
    resumed: bool = False  # its state was loaded (a resumed run starts mid-schedule)


class SchedulerHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.records: weakref.WeakKeyDictionary[Any, SchedulerRecord] = weakref.WeakKeyDictionary()
        self.all: list[SchedulerRecord] = []
        self.depth = 0
        self.total = 0  # steps of every scheduler
        self.writers: weakref.WeakKeyDictionary[Any, WriterRecord] = weakref.WeakKeyDictionary()
        self.all_writers: list[WriterRecord] = []

    def install(self) -> None:
        from torch.optim import lr_scheduler

        classes = [lr_scheduler.LRScheduler] + [
            cls for cls in vars(lr_scheduler).values()
            if isinstance(cls, type) and issubclass(cls, lr_scheduler.LRScheduler)
            and "step" in cls.__dict__ and cls is not lr_scheduler.LRScheduler]
        for cls in classes:
            replace_attr(self.session.stack, cls, "step", self._wrap_step)
        # timm's schedulers write param_groups themselves: only where they were called is noted
        self.session.imports.on_import("timm.scheduler.scheduler", self._wrap_timm)

    def _wrap_timm(self, module: Any) -> None:
        cls = getattr(module, "Scheduler", None)
        if isinstance(cls, type):
            for name in ("step", "step_update"):
                replace_attr(self.session.stack, cls, name,
                             lambda original, name=name: self._wrap_timm_step(original, name))
            replace_attr(self.session.stack, cls, "load_state_dict", self._wrap_timm_load)

    def _wrap_timm_step(self, original: Any, name: str) -> Any:
        guard = self.session.guard

        def step(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            record = guard.call("scheduler tracking", self._writer, scheduler)
            result = original(scheduler, *args, **kwargs)
            guard.call("scheduler tracking", self._timm_stepped, scheduler, record, name)
            return result

        return step

    def _wrap_timm_load(self, original: Any) -> Any:
        guard = self.session.guard

        def load_state_dict(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            record = guard.call("scheduler tracking", self._writer, scheduler)
            if record is not None:
                record.resumed = True
            return original(scheduler, *args, **kwargs)

        return load_state_dict

    def _writer(self, scheduler: Any) -> WriterRecord | None:
        """The scheduler's record, made at its first call: the LR its constructor left in the
        optimizer is where the schedule starts (the first optimizer step should use it)."""
        record = self.writers.get(scheduler)
        if record is None:
            optimizer = getattr(scheduler, "optimizer", None)
            owner = self.session.record_for(optimizer, create=False) if optimizer is not None else None
            if owner is None or getattr(scheduler, "param_group_field", "lr") != "lr":
                return None
            groups = optimizer.param_groups
            start = groups[0].get("lr") if groups else None
            record = WriterRecord(type(scheduler).__name__, owner,
                                  start if type(start) is float else None)
            self.writers[scheduler] = record
            self.all_writers.append(record)
        return record

    def _timm_stepped(self, scheduler: Any, record: WriterRecord | None, method: str) -> None:
        self.total += 1
        if record is None:
            return
        owner = record.owner
        site = user_site()
        owner.window.writer_site = owner.window.writer_site or site
        if owner.steps or owner.skipped or record.advanced_site is not None or record.start is None:
            return
        optimizer = owner.ref()
        groups = optimizer.param_groups if optimizer is not None else None
        lr = groups[0].get("lr") if groups else None
        if type(lr) is float and lr != record.start:  # moved before the first step
            record.advanced_site, record.method = site, method

    def _wrap_step(self, original: Any) -> Any:
        guard = self.session.guard

        def step(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            if self.depth or getattr(scheduler, "_step_count", 1) == 0:  # nested or initial step
                return original(scheduler, *args, **kwargs)
            guard.call("scheduler tracking", self._before, scheduler)
            self.depth += 1
            try:
                if getattr(scheduler, "_step_count", 2) <= 1:  # torch warns on the first step
                    return call_with_user_warnings(original, user_site(), scheduler, *args, **kwargs)
                return original(scheduler, *args, **kwargs)
            finally:
                self.depth -= 1

        return step

    def _before(self, scheduler: Any) -> None:
        session = self.session
        record = self.records.get(scheduler)
        if record is None:
            record = self.records[scheduler] = SchedulerRecord(type(scheduler).__name__)
            self.all.append(record)
        record.steps += 1
        self.total += 1
        optimizer = getattr(scheduler, "optimizer", None)
        owner = session.record_for(optimizer, create=False) if optimizer is not None else None
        if owner is None:
            return
        owner.window.scheduler_steps += 1
        record.owner = owner
        site = user_site()
        record.site = record.site or site
        if owner.steps == 0 and owner.skipped == 0:
            if record.steps == 1:
                record.early_site = site
        elif record.early_site is not None:
            self.report_early(record)
        if owner.last_skipped:
            attempts = owner.steps + owner.skipped
            if record.steps * 2 >= attempts:  # a per-step scheduler, not a per-epoch one
                session.report("LC306", "the LR scheduler advances although GradScaler skipped "
                               "this optimizer step (inf/NaN gradients)", site)
        if record.window == owner.window.number:
            record.in_window += 1
            if record.in_window == 2 and owner.window.entries:
                record.early_site = None  # the early step is a symptom of stepping per micro-batch
                session.report("LC301", "the LR scheduler steps on every micro-batch while the "
                               "optimizer steps once per window: the schedule runs too fast; "
                               "step it in the optimizer-step branch", site)
        else:
            record.window, record.in_window = owner.window.number, 1
        horizon_attr = _HORIZONS.get(record.kind)
        horizon = getattr(scheduler, horizon_attr, None) if horizon_attr else None
        record.horizon = horizon if isinstance(horizon, int) else None
        record.position = scheduler.last_epoch + 1
        if isinstance(horizon, int) and scheduler.last_epoch + 1 > horizon:
            session.report("LC303", f"{record.kind} is stepped past its horizon "
                           f"({horizon_attr}={horizon}): the horizon is counted in other units "
                           "than the stepping (epochs vs batches, micro-batches vs steps)", site)

    def report_early(self, record: SchedulerRecord) -> None:
        self.session.report("LC302", "the LR scheduler steps before its optimizer has stepped: "
                            "the first value of the schedule is skipped; call "
                            "scheduler.step() after optimizer.step()", record.early_site, 0)
        record.early_site = None

    def finish(self) -> None:
        for record in self.all:
            if record.early_site is not None:
                self.report_early(record)
            if self.session.exit_status.get("how") == "finished":
                self._short_of_horizon(record)
        for writer in self.all_writers:
            self._advanced_before_first_step(writer)

    def _advanced_before_first_step(self, writer: WriterRecord) -> None:
        """LC302 from the LR actually used: the optimizer's first step used another LR than the
        schedule's first value, because a call before that step advanced it. A call that leaves
        the LR where it starts (``step_update(0)``, a per-epoch ``step(0)`` of a per-update
        schedule) is harmless; a resumed run (optimizer or scheduler state loaded) starts
        mid-schedule on purpose; a schedule advanced per micro-batch is LC301's finding."""
        owner = writer.owner
        first = owner.first_lr
        if writer.advanced_site is None or first is None or writer.start is None or writer.resumed \
                or owner.resumed or owner.lr_micro_reported or first == writer.start:
            return
        self.session.report("LC302", f"the first optimizer step used lr {first:g} but the "
                            f"{writer.kind} starts at {writer.start:g}: {writer.method}() ran "
                            "before the optimizer's first step and skipped the schedule's first "
                            f"value; call {writer.method}() after optimizer.step()",
                            writer.advanced_site, 0)

    def _short_of_horizon(self, record: SchedulerRecord) -> None:
        """A run that ended normally about N times short of the horizon, N being the
        accumulation: the horizon was counted in micro-batches, the stepping per optimizer step."""
        horizon, owner, steps = record.horizon, record.owner, record.position
        if horizon is None or owner is None:
            return
        sizes = [(count, size) for size, count in owner.sizes.items() if size]
        accumulation = max(sizes)[1] if sizes else 1
        if accumulation >= 2 and 0 < steps < horizon and \
                0.8 * accumulation <= horizon / steps <= 1.25 * accumulation:
            self.session.report("LC303", f"{record.kind} ended the run at step {steps} of its "
                                f"horizon {_HORIZONS[record.kind]}={horizon}, about {accumulation}x "
                                "short: the horizon counts micro-batches but the scheduler steps "
                                f"once per optimizer step ({accumulation} micro-batches)", record.site)
