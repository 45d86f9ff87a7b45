"""LC301 and LC303 on the learning rate the optimizer actually used, whatever wrote it
(``LRScheduler`` objects are also checked by their calls in ``hooks.scheduler``; these checks
cover a LR written into ``param_groups`` by hand, as nanoGPT and minimind do, and third-party
schedulers such as timm's):

* LC301: the LR read at the backward passes of one window changes between each two of its
  micro-batches (the schedule advances per micro-batch), with no ``LRScheduler`` step in that
  window (that case is counted by call): in one window of 3+ micro-batches (a schedule that ends
  within the first window shows only there), or in at least 2 windows and half of those with 2+
  micro-batches. A LR written once in a window (a per-epoch decay computed from the micro-batch
  count, a window that spans the epoch's end) changes at one boundary only and is not counted;
  a schedule that changes the LR at every optimizer step changes it between windows, not in one.
* LC303: the LR decays to a value it then keeps until the end of a run that ended normally,
  and it got there about N times too early under accumulation N (the run is 0.8N to 1.25N times
  as long as the decay): the horizon was counted in micro-batches.

The line that writes the LR is found by tracing the user's code for one window, the first time
the LR changes without an ``LRScheduler`` step (``hooks.lr_writer``)."""
from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING

from ..hooks.lr_writer import LrWriterLocator
from ..series import LR

if TYPE_CHECKING:
    from ..session import Session
    from ..state import OptimizerRecord, Window

MIN_WINDOWS = 2


def on_close(session: Session, record: OptimizerRecord, window: Window, size: int,
             previous: list[float | None] | None) -> None:
    """Called when ``window`` closed, after ``record.lrs`` was read for its step."""
    locator = record.lr_locator
    if locator is not None and locator.active and locator.started_at < window.number:
        locator.stop()  # a whole window went by
    if locator is not None and locator.found is not None and record.lr_writer is None:
        record.lr_writer = locator.found
    if window.writer_site is not None and record.lr_writer is None:
        record.lr_writer = window.writer_site
    by_hand = not window.scheduler_steps
    if by_hand and size >= 2 and window.lr_changes == size - 1:  # before each micro-batch
        record.lr_micro_windows += 1
        if size >= 3 and record.lr_micro_first is None:
            record.lr_micro_first = (record.steps + record.skipped - 1, size)
    changed = window.lr_changes or (previous is not None and record.lrs is not previous
                                    and record.lrs != previous)
    if changed and by_hand and locator is None and record.lr_writer is None:
        locate(record, window.number + 1)


def changed_in_window(record: OptimizerRecord, window: Window) -> None:
    """The LR changed between two backward passes of the open window (main thread, after the
    backward): the line that writes it is looked for from here on, because a schedule that ends
    within the first window writes it again only in this window."""
    if record.lr_locator is None and record.lr_writer is None and not window.scheduler_steps \
            and window.writer_site is None:
        locate(record, window.number)


def locate(record: OptimizerRecord, window_number: int) -> None:
    """Trace the user's code from the window ``window_number`` on, until the LR changes."""
    optimizer = record.ref()
    locator = LrWriterLocator(optimizer.param_groups[0] if optimizer is not None and optimizer.param_groups else {})
    locator.started_at = window_number
    record.lr_locator = locator
    if not _compiled():  # a trace function would make torch.compile fall back to eager code
        locator.start(sys._getframe(1))


def _compiled() -> bool:
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    return utils is not None and (counters is None or bool(counters["stats"].get("unique_graphs")))


def finish(session: Session, record: OptimizerRecord) -> None:
    if record.lr_locator is not None:
        record.lr_locator.stop()
        record.lr_writer = record.lr_writer or record.lr_locator.found
    site = record.lr_writer or record.step_site
    accumulated = sum(1 for h in record.history if h.size >= 2)
    first = record.lr_micro_first
    if first is not None or (record.lr_micro_windows >= MIN_WINDOWS
                             and record.lr_micro_windows * 2 >= accumulated):
        size = first[1] if first else \
            Counter(h.size for h in record.history if h.size >= 2).most_common(1)[0][0]
        session.report("LC301", f"the learning rate changes before each micro-batch of an "
                       f"optimizer step (in {record.lr_micro_windows} of {accumulated} windows, "
                       f"{size} micro-batches each): the schedule advances {size} times per step "
                       "and ends that much too early; advance it once per optimizer step, from "
                       "the optimizer step count", site, first[0] if first else 0)
        record.lr_micro_reported = True
    if session.exit_status.get("how") == "finished":
        _ended_early(session, record, site)


def _ended_early(session: Session, record: OptimizerRecord, site: object) -> None:
    series = record.series
    if series.bucket != 1:
        return  # downsampled: the exact settling step is not kept
    lrs = [row[LR][0] if row[LR] else None for row in series.rows]
    if len(lrs) < 8 or any(lr is None for lr in lrs):
        return
    final = lrs[-1]
    settled = len(lrs)
    while settled > 0 and lrs[settled - 1] == final:
        settled -= 1
    if settled == 0 or final >= max(lrs):  # constant, or a warmup to a constant
        return
    sizes = [(count, size) for size, count in record.sizes.items() if size >= 2]
    if not sizes:
        return
    accumulation = max(sizes)[1]
    ratio = len(lrs) / settled
    if 0.8 * accumulation <= ratio <= 1.25 * accumulation:
        session.report("LC303", f"the learning rate reached its final value {final:g} at step "
                       f"{settled} of {len(lrs)} and stayed there: about {accumulation}x too early "
                       f"under accumulation {accumulation}: the schedule's horizon counts "
                       "micro-batches, the LR is set once per optimizer step", site, settled)
