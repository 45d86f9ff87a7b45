"""## What it does
Checks for an EMA / weight-averaging update (`ema.update(model)`,
`AveragedModel.update_parameters`, timm `ModelEma*`) that runs on every micro-batch of a
gradient-accumulation loop instead of once per optimizer step. An EMA of numbers (a loss or
output statistic, `lecam_ema.update(d_out.mean().item(), "D_real", step)`) is no weight EMA: each
micro-batch brings a new value to average. Nor is an update helper of another module that the loop
hands its own counter (pycls' `update_model_ema(cfg, ..., cur_iter=idx)`, which updates only where
`cur_iter % cfg.EMA_UPDATE_PERIOD == 0`): it picks the micro-batches it updates on, and the file does
not show whether its period spans an optimizer step. A condition around the whole train step
(`if self.iter < self.max_iter: self.train_one_iter(...)`), shared by every backward, step and the
update and testing no window, is set aside: under it the update still runs with each backward.

## Why is this bad?
Between optimizer steps the weights do not change, so N-1 of N updates just pull the average
towards the same weights again: the effective decay becomes `decay ** N` and the EMA tracks
the raw weights far more closely than configured. Accelerate does not gate EMA updates either.
A loss-scaling helper of another module that the loop tells its iteration
(`loss_scaler.set_iters(i)`), with the zeroing under a window test on the same counter, steps
only once per window too.

## Fix
Move the EMA update into the step branch, after `optimizer.step()`
(or under `if accelerator.sync_gradients:`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import move_to_step
from loopcheck.model import Event, FileModel, GuardKind, Kind, Style, TrainingLoop
from loopcheck.model.scaler_counter import told_the_iteration, zeroes_per_window
from loopcheck.model.syntax import func_name, names_in
from loopcheck.rules._base import Rule, Violation


class EmaPerBackward(Rule):
    code = "LC401"
    message = "the EMA update runs on every micro-batch instead of once per optimizer step"
    fixable = True

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        ema.update(model)
""",
        """
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        optimizer.zero_grad()
    if accelerator.sync_gradients:
        ema_model.step(model.parameters())
""",
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    ema.update(model)  # LC401
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for batch in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        optimizer.zero_grad()
        ema_model.update_parameters(model)  # LC401
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE) \
                    and not _steps_per_window_in_a_helper(model, training):
                continue
            shared, first = _shared_condition(training), training.backwards[0].conds if training.backwards else ()
            for ema in training.events(Kind.EMA_UPDATE):
                # (the leading conditions the update shares with every backward and step)
                k = next((i for i in range(shared) if ema.conds[i:i + 1] != first[i:i + 1]), shared)
                if all(training.guard(b, b.conds[k:]).always for b in training.backwards) \
                        and training.guard(ema, ema.conds[k:]).always \
                        and not _told_the_iteration(model, training, ema):
                    fix = move_to_step(model, training, ema, "move the EMA update after the optimizer step", exact=True) \
                        if training.style in (Style.GUARDED, Style.MICRO_LOOP) and not k else None
                    yield self.at(ema, _message(ema), fix)


def _shared_condition(training: TrainingLoop) -> int:
    """How many leading conditions every backward and every step of the loop share, where they test
    neither a window nor a sync (Unicorn's ``if self.iter < self.max_iter:`` around a whole train step):
    the loop trains only where they hold, and an EMA update under them too runs with each backward."""
    events = [*training.backwards, *training.steps]
    if not events or any(e.loop is not training.loop for e in events):
        return 0
    shared = min(len(e.conds) for e in events)
    while shared and any(e.conds[:shared] != events[0].conds[:shared] for e in events):
        shared -= 1
    while shared and (any(c.test is None for c in events[0].conds[:shared]) or training.guard(
            events[0], events[0].conds[:shared]).kind not in (GuardKind.UNKNOWN, GuardKind.INVARIANT)):
        shared -= 1
    return shared


def _steps_per_window_in_a_helper(model: FileModel, training: TrainingLoop) -> bool:
    """A loop read as stepping on every iteration whose only steps are a loss-scaling helper the file
    cannot see into (no ``__call__`` of its own), told the loop counter before each call, while the
    loop clears the gradients only under a window test on that counter: the helper steps per window
    (ViTs-vs-CNNs' AccumulativeScaler), and each micro-batch in between sees unchanged weights."""
    return training.style is Style.PLAIN and bool(training.steps) and not model.index.functions.get("__call__") \
        and all(told_the_iteration(training, s) for s in training.steps) and zeroes_per_window(training)


def _told_the_iteration(model: FileModel, training: TrainingLoop, ema: Event) -> bool:
    """An update helper of another module handed the loop's own counter (pycls' `update_model_ema(cfg,
    ..., cur_iter=idx)`, which returns unless `cur_iter % cfg.EMA_UPDATE_PERIOD == 0`): it decides on
    which micro-batches to update, and the file does not show whether that period spans a step."""
    call, loop = ema.node, training.loop.node
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name) \
            or call.func.value in model.index.functions or not isinstance(loop, cst.For):
        return False
    counters = _counters(loop)
    return any(names_in(arg.value) & counters for arg in call.args)


def _counters(loop: cst.For) -> set[str]:
    """The loop's iteration counter: ``i`` of ``for i, batch in enumerate(loader)`` or of ``for i in
    range(n)`` (not the batch it draws)."""
    iterable = loop.iter
    called = func_name(iterable) if isinstance(iterable, cst.Call) else None
    if called == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
        return names_in(loop.target.elements[0].value)
    return names_in(loop.target) if called == "range" else set()


def _message(ema: Event) -> str:
    """A helper function (``update_model_ema(cfg, model, model_ema, cur_iter)``) may update on only
    some of its calls (its own period): the message then says what runs on every micro-batch, and
    claims N-1 of N stale updates only where every call updates."""
    call = ema.node
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name):
        return (f"`{call.func.value}(...)` runs on every micro-batch, not once per optimizer step: each EMA update "
                "it makes between two steps sees unchanged weights (N-1 of N where it updates on every call, "
                "the effective decay then decay ** N)")
    return (f"`{ema.receiver}` is updated on every micro-batch: N-1 of N updates see unchanged weights and the "
            "effective decay becomes decay ** N")
