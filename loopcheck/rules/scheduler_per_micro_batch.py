"""## What it does
Checks for a per-step learning-rate scheduler stepped on every micro-batch of a
gradient-accumulation loop.

## Why is this bad?
The schedule is meant to advance once per optimizer update. Stepped per micro-batch it runs N
times too fast: warmup ends after 1/N of its length and a cosine or linear decay reaches its
minimum after 1/N of training. Not flagged: Accelerate's prepared scheduler inside
`accelerator.accumulate()` (it gates itself) and a schedule whose horizon is visibly counted in
micro-batches (`total_steps=epochs * len(loader)`). A scheduler that the file leaves out of
`accelerator.prepare(...)` is not gated and is flagged.

## Fix
Move `scheduler.step()` into the step branch, right after `optimizer.step()`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_to_step
from loopcheck.model import FileModel, Kind, Role, Style
from loopcheck.model.horizon import Unit, horizon_expr, unit_of
from loopcheck.rules._base import Rule, Violation


def _unprepared(model: FileModel, name: str | None) -> bool:
    """The file prepares its objects with Accelerate, but not this scheduler: nothing gates it."""
    return bool(model.roles.prepared) and not model.roles.is_prepared(name)


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
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()  # LC301
""",
        """
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
                if training.style is Style.ACCELERATE and not _unprepared(model, scheduler.receiver):
                    continue  # a prepared scheduler only steps when the optimizer does
                horizons = [horizon_expr(c, model.index) for c in
                            model.roles.constructors(scheduler.receiver, Role.SCHEDULER)]
                units = [unit_of(h, model.index) if h is not None else None for h in horizons]
                # a literal horizon (`T_max=100`) is a number of scheduler steps fixed by hand, not a count
                # of micro-batches derived from the data: stepping it N times per update ends it N times early
                literal = any(isinstance(h, cst.Integer) for h in horizons)
                if units and not literal and not any(u in (Unit.UPDATES, Unit.EPOCHS) for u in units):
                    continue  # built here with a horizon in micro-batches, or one we cannot read: no guess
                fix = move_to_step(model, training, scheduler, "move the scheduler step after the optimizer step")
                yield self.at(scheduler, f"`{scheduler.receiver}.step()` runs on every micro-batch but the optimizer "
                                         "steps every N: the schedule advances N times too fast", fix)
