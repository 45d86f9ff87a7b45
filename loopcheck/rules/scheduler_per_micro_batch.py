"""## What it does
Checks for a per-step learning-rate scheduler stepped on every micro-batch of a
gradient-accumulation loop.

## Why is this bad?
The schedule is meant to advance once per optimizer update. Stepped per micro-batch it runs N
times too fast: warmup ends after 1/N of its length and a cosine or linear decay reaches its
minimum after 1/N of training. Not flagged: Accelerate's prepared scheduler in a loop that
enters `accelerator.accumulate()` (it gates itself, unless the Accelerator is built with
`step_scheduler_with_optimizer=False`), an Accelerate loop whose Accelerator is given no
accumulation count, a schedule whose horizon is visibly counted in
micro-batches (`total_steps=epochs * len(loader)`) or cannot be read, and a scheduler built
nowhere in the file (a parameter, a factory's list) where no scheduler the file builds shows a
horizon in optimizer steps: stepping per micro-batch is right when the horizon counts
micro-batches, and nothing shows which it counts. A scheduler that the file leaves out of
`accelerator.prepare(...)` is not gated and is flagged. A horizon that is the bound of an
Accelerate loop on a count of updates (`while completed_steps < max_train_steps:` where
`completed_steps += 1` runs only under `if accelerator.sync_gradients:`) counts optimizer steps;
so does the bound of a loop that accumulates by hand on a count of the steps it takes under its
step test (`while done < args.total_steps:` where `done += 1` runs only under `if micro % N == 0:`),
also multiplied by `accelerator.num_processes` (`num_training_steps=args.max_train_steps *
accelerator.num_processes`, the diffusers scripts' horizon, counts optimizer steps per process: the
message adds that on P processes it also stretches an unprepared schedule P times, LC303's finding).

## Fix
Move `scheduler.step()` into the step branch, right after `optimizer.step()`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_to_step
from loopcheck.model import FileModel, Kind, Role, Style
from loopcheck.model.accelerate import accumulation_setting, scheduler_gated, updates_bound
from loopcheck.model.horizon import Unit, horizon_expr, times_processes, unit_of
from loopcheck.model.roles import role_of_constructor
from loopcheck.model.syntax import func_name, same_setting, source
from loopcheck.rules._base import Rule, Violation


def _built_in_file(model: FileModel) -> list[cst.Call]:
    """Every scheduler the file builds, for a stepped name that is built nowhere in it (a parameter, a
    loop over a list of schedulers): all of them must show a horizon in optimizer steps to flag it."""
    return [call for calls in model.roles.constructed.values() for call in calls
            if role_of_constructor(func_name(call) or "") is Role.SCHEDULER]


class SchedulerPerMicroBatch(Rule):
    code = "LC301"
    message = "the LR scheduler steps on every micro-batch: the schedule runs N times too fast"
    fixable = True

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=epochs * len(train_loader))
for epoch in range(epochs):
    for i, (x, y) in enumerate(train_loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
""",
        """
def train_one_epoch(model, loader, optimizer, scheduler, accum):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
""",
    ]
    INVALID = [
        """
scheduler = get_linear_schedule_with_warmup(optimizer, 100, epochs * math.ceil(len(loader) / accum))
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()  # LC301
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
max_train_steps = epochs * math.ceil(len(loader) / gradient_accumulation_steps)
lr_scheduler = get_cosine_schedule_with_warmup(optimizer, 100, max_train_steps)
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        lr_scheduler.step()  # LC301
        optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0 or i + 1 == len(loader):
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()  # LC301
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE):
                continue
            if not all(training.guard(b).always for b in training.backwards):
                continue
            for scheduler in training.events(Kind.SCHEDULER_STEP):
                if not training.guard(scheduler).always or scheduler.has_args:
                    continue  # `step(cur_epoch, cur_step=i)` sets the LR for a position: it does not tick
                if training.style is Style.ACCELERATE and (accumulation_setting(model) is None or
                                                           scheduler_gated(model, scheduler.receiver) is not False):
                    continue  # a prepared scheduler only steps when the optimizer does; without N both step each batch
                own = model.roles.constructors(scheduler.receiver, Role.SCHEDULER)
                calls = own or _built_in_file(model)
                if not calls:
                    continue  # built elsewhere (a factory, a caller in another file): nothing shows its unit
                # a literal horizon (`T_max=100`) is a number of scheduler steps fixed by hand, not a count
                # of micro-batches derived from the data: stepping it N times per update ends it N times early
                # or the bound the loop stops at on a count of Accelerate's real optimizer steps
                # (or on a count of the steps a loop accumulating by hand takes under its step test)
                counted = updates_bound(training.loop) if training.style is Style.ACCELERATE else \
                    updates_bound(training.loop, training.step_guard.test) \
                    if training.style is Style.GUARDED and training.step_guard is not None \
                    and training.step_guard.test is not None else None
                horizons = [horizon_expr(c, model.index) for c in calls]
                # `max_train_steps * accelerator.num_processes` counts per process what `max_train_steps`
                # counts; the horizon's divisor is the step test's own count, whatever it is called (`/ N`)
                per_update = [isinstance(h, cst.Integer) or (h is not None and unit_of(
                                  h, model.index, counts=training.count_names) in (Unit.UPDATES, Unit.EPOCHS))
                              or (counted is not None and h is not None and
                                  same_setting(times_processes(h) or h, counted))
                              for h in horizons]
                if not (any(per_update) if own else all(per_update)):
                    continue  # a horizon in micro-batches, or one we cannot read: no guess
                fix = move_to_step(model, training, scheduler, "move the scheduler step after the optimizer step")
                scaled = next((h for h, p in zip(horizons, per_update) if p and h is not None
                               and times_processes(h) is not None), None) if own else None
                # a horizon multiplied by the process count, for a scheduler stepped once per call: on P
                # processes that offsets P of the N (LC303 says so of the horizon)
                also = f" (on P processes its horizon `{source(scaled)}` also stretches it P times: N/P times " \
                       "in all)" if scaled is not None else ""
                yield self.at(scheduler, f"`{scheduler.receiver}.step()` runs on every micro-batch but the optimizer "
                                         f"steps every N: the schedule advances N times too fast{also}", fix)
