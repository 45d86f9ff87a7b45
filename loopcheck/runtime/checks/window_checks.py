"""Checks when an optimizer window closes (the step ran, or GradScaler skipped it)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..series import read_lrs
from ..state import HISTORY_LIMIT, BackwardInfo, OptimizerRecord, Window, WindowSummary
from . import loss_scaling, lr_trajectory

if TYPE_CHECKING:
    from ..callsite import Site
    from ..session import Session

EXCESSIVE_WINDOW = 16
COLLAPSE_SKIPS = 10


def close(session: Session, record: OptimizerRecord, skipped: bool) -> None:
    session.windows_closed += 1
    window = record.window
    dominant = window.dominant()
    micro = [bw for bw, _ in dominant]
    size = len(micro)
    index = record.steps + record.skipped  # findings of this window carry its step index
    if skipped:
        record.skipped += 1
        record.consecutive_skips += 1
    else:
        record.steps += 1
        record.consecutive_skips = 0
    record.last_skipped = skipped
    record.sizes[size] += 1
    record.passes[window.passes()] += 1
    regular = size >= 2 and size == record.sizes.most_common(1)[0][0]
    one_pass = len({bw.epoch for bw in micro}) <= 1  # a window across passes is LC105's case
    if _reset_before_every_micro_batch(window, dominant):
        session.report("LC101", f"gradients are reset before each of the {size} backward "
                       "passes of a window that ends in one optimizer step: only the last "
                       "micro-batch reaches the step; zero them in the step branch",
                       window.reset_site or micro[-1].site, index)
    else:
        _reset_between_losses(session, window, index)
        if regular and one_pass:
            loss_scaling.check(session, micro, index)
    if window.closure_added is not None and session.tracker.zero_calls == record.zero_calls_at_step:
        session.report("LC103", "the closure passed to optimizer.step() never clears the "
                       "gradients: each of its evaluations adds to the gradients of the ones "
                       "before; call optimizer.zero_grad() at the top of the closure",
                       window.closure_added, index)
    if window.closure_zeroed is not None:
        session.report("LC104", "the closure passed to optimizer.step() clears the gradients "
                       "after its backward pass: the optimizer reads cleared gradients and does "
                       "not move (LBFGS stops at once); call optimizer.zero_grad() at the top of "
                       "the closure", window.closure_zeroed, index)
    _carried_over(session, record, window, index)
    if not window.entries and not window.in_step_backwards and not window.zero_grad_calls \
            and record.last_size and not skipped:
        session.report("LC109", "the optimizer steps again with no backward pass and no "
                       "zero_grad since its last step: it applies the same gradients twice",
                       record.step_site, index)
    if size > EXCESSIVE_WINDOW:
        session.report("LC110", f"{size} micro-batches are accumulated per optimizer step "
                       f"(more than {EXCESSIVE_WINDOW}): stale, high-variance windows",
                       micro[-1].site, index)
    if record.consecutive_skips == COLLAPSE_SKIPS:
        session.report("LC207", f"GradScaler skipped the last {COLLAPSE_SKIPS} optimizer steps "
                       "(inf/NaN gradients) and keeps shrinking the scale: training has "
                       "stopped; look for the overflow instead of relying on the scaler",
                       record.step_site, index)
    if len(record.history) < HISTORY_LIMIT:
        record.history.append(_summarise(session, record, micro, index))
    record.last_size = size + window.in_step_backwards
    record.window = Window(window.number + 1)
    if not skipped:
        session.emas.on_step()
    memory = None
    if record is session.main_record():
        memory = session.memory.on_step(session.step_index())
        if window.number % 4 == 0:  # the main optimizer's own windows: others may close in between
            session.retained.on_step()
        if session.retained.evaluations:
            session.retained.on_closure_step()
    _record_series(session, record, window, index, skipped, memory)


def _record_series(session: Session, record: OptimizerRecord, window: Window, index: int,
                   skipped: bool, memory: int | None) -> None:
    """One row of the per-step series (``series``): host values only."""
    optimizer = record.ref()
    previous = record.lrs
    if optimizer is not None:
        record.lrs = lrs = read_lrs(optimizer.param_groups, record.lrs)
        lr = lrs[0] if lrs else None
        if lr is not None:
            record.first_lr = lr if record.first_lr is None else record.first_lr
            record.max_lr = lr if record.max_lr is None or lr > record.max_lr else record.max_lr
    scale = record.scale.current() if record.scale is not None and window.scaled else None
    if skipped:
        record.series.note_skipped(index)
    record.series.add((index, window.passes(), record.lrs, scale,
                       memory, session.windows_closed, session.schedulers.total,
                       session.emas.total, session.zero_grad_calls))
    if window.lr_changes or record.lrs is not previous or record.lr_locator or window.writer_site:
        session.guard.call("learning-rate tracking", lr_trajectory.on_close, session, record, window,
                           len(window.entries), previous)


def _reset_before_every_micro_batch(window: Window, dominant: list[tuple[BackwardInfo, bool]]) -> bool:
    entries = window.entries
    if len(dominant) < 2:
        return False
    site = dominant[0][0].site
    indices = [i for i, (bw, _) in enumerate(entries) if bw.site == site]
    if len(indices) < 2:
        return False
    return all(any(reset for _, reset in entries[a + 1:b + 1]) for a, b in zip(indices, indices[1:]))


def _reset_between_losses(session: Session, window: Window, index: int) -> None:
    """A reset between two backward passes of one window discards the earlier ones: wrong when
    those reached only this optimizer (a GAN's generator loss also reaches the discriminator,
    whose reset before its own losses is right: that backward fed the generator's step)."""
    start = 0
    for position, site in window.resets:
        dropped = [bw for bw, _ in window.entries[start:position] if bw.targets == 1]
        if dropped:
            session.report("LC101", f"gradients are reset between two backward passes that feed "
                           f"one optimizer step: the backward at {_line(dropped[0].site, site)} "
                           "is thrown away before the step; zero the gradients once, before "
                           "the window's first backward", site, index)
            return
        start = position


def _carried_over(session: Session, record: OptimizerRecord, window: Window, index: int) -> None:
    """Gradients from before the previous step still summed into this one: no zero_grad."""
    if window.carried and not window.reset_after_carry:
        record.carried_streak += 1
        if record.carried_streak == 2:
            session.report("LC103", "gradients are never cleared between optimizer steps: each "
                           "step adds the gradients of every earlier step; call zero_grad() "
                           "after the step", record.step_site, index)
    else:
        record.carried_streak = 0


def _line(site: Site | None, finding: Site | None) -> str:
    """``line N``, or ``file.py:N`` when the line is in another file than the finding's."""
    if site is None:
        return "line ?"
    if finding is not None and finding.file == site.file:
        return f"line {site.line}"
    return f"{os.path.basename(site.file)}:{site.line}"


def _summarise(session: Session, record: OptimizerRecord, micro: list[BackwardInfo],
               step: int) -> WindowSummary:
    data, window = session.data, record.window
    epochs: list[tuple[int, int]] = []
    for bw in micro:
        if bw.epoch is not None and (not epochs or epochs[-1] != bw.epoch):
            epochs.append(bw.epoch)
    entries, dropped = window.entries, False
    for i in range(1, len(entries)):
        if entries[i][1] and entries[i - 1][0].epoch not in (None, entries[i][0].epoch):
            dropped = True
            break
    last = epochs[-1] if epochs else None
    return WindowSummary(
        size=len(micro), epochs=tuple(epochs), exhausted=last in data.exhausted,
        covered_epoch=len(epochs) == 1 and data.batches[epochs[0]] == len(micro),
        site=micro[-1].site if micro else None, step_site=record.step_site,
        step_call=record.step_call, step=step,
        dropped_epoch=dropped)
