"""End-of-run checks over the window history of each optimizer and the EMA records."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..callsite import Site
from ..source import condition_of
from ..state import OptimizerRecord, WindowSummary
from . import lr_scaling, lr_trajectory, memory_growth

if TYPE_CHECKING:
    from ..session import Session


def run(session: Session) -> None:
    for record in session.records:
        session.guard.call("accumulation analysis", accumulation, session, record)
        session.guard.call("learning-rate scaling", lr_scaling.run, session, record)
        session.guard.call("learning-rate trajectory", lr_trajectory.finish, session, record)
        if record.steps + record.skipped >= 2 and record.total_backwards == 0:
            session.report("LC113", f"{record.kind} stepped {record.steps} times but no backward "
                           "pass ever reached its parameters: the micro-batches are collected "
                           "but never back-propagated", record.step_site)
    steps = session.step_index()
    for ema in session.emas.all:
        if ema.updates == 0 and steps - ema.created_at_step >= 2:
            session.report("LC402", f"the {ema.kind} created here is never updated although the "
                           f"optimizer stepped {steps - ema.created_at_step} times after its "
                           "creation", ema.site)
    session.guard.call("scheduler analysis", session.schedulers.finish)
    session.guard.call("Accelerate analysis", accumulation_not_entered, session)
    session.guard.call("memory analysis", memory_growth.check, session)


def accumulation_not_entered(session: Session) -> None:
    """LC111: ``Accelerator(gradient_accumulation_steps=N)``, ``accumulate()`` never entered, and
    the optimizer stepped after every backward pass. A loop that gates its steps itself, every N
    micro-batches, accumulates (``accelerator.backward`` divides by N) and is not reported."""
    main = session.main_record()
    sizes = main.sizes if main is not None else None
    if not sizes or sizes.most_common(1)[0][0] != 1:
        return
    for accelerator in session.accelerate.all:
        n = accelerator.steps
        if n >= 2 and not accelerator.accumulate_calls and sizes[1] >= n:
            session.report("LC111", f"Accelerator(gradient_accumulation_steps={n}) is configured "
                           "but accelerator.accumulate() is never entered: the optimizer stepped "
                           f"after every backward pass ({sizes[1]} steps of one micro-batch), so "
                           f"nothing accumulates, while accelerator.backward() divides each loss "
                           f"by {n}; run each micro-batch inside `with accelerator.accumulate(model):`",
                           accelerator.site, 0)
            return


def accumulation(session: Session, record: OptimizerRecord) -> None:
    history = [h for h in record.history if h.size]
    if not history:
        return
    if len(history) >= 2 and all(h.covered_epoch and h.exhausted and h.size >= 2 for h in history):
        first = history[0]
        session.report("LC108", f"the optimizer steps once per loader pass ({first.size} "
                       "backward passes each), after the batch loop: the step sits outside the "
                       "batch loop", first.step_call or first.step_site, first.step)
        return
    regular = Counter(h.size for h in history).most_common(1)[0][0]
    if regular < 2:
        return
    explained: set[int] = set()
    for i, h in enumerate(history):
        # a window of N across two passes is an infinite loader (cycle(dl)) stepping every N
        if (len(h.epochs) >= 2 and h.size > regular) or h.dropped_epoch:
            explained.add(i)
            session.report("LC105", "the last micro-batches of a loader pass were not stepped: "
                           "their gradients " + ("were dropped" if h.dropped_epoch else
                           "leaked into the next pass's first step") + "; also step when the "
                           "pass ends", _step_condition(h), h.step)
    for i in _pass_starts(history):
        h = history[i]
        if i in explained:
            continue
        if h.size == 1 or (regular >= 3 and h.size == regular - 1):
            explained.add(i)
            session.report("LC106", f"the first optimizer step of a pass comes after {h.size} "
                           f"micro-batch{'es' if h.size > 1 else ''} instead of {regular}: the "
                           "step condition fires on the wrong micro-batch", _step_condition(h), h.step)
    explained |= {i for i in _pass_ends(history) if history[i].size < regular}
    irregular = [h for i, h in enumerate(history) if i not in explained and h.size != regular]
    if irregular:
        sizes = sorted({h.size for h in history})
        session.report("LC112", f"the number of backward passes per optimizer step varies "
                       f"({', '.join(map(str, sizes))}; mostly {regular})", irregular[0].site,
                       irregular[0].step)


def _step_condition(h: WindowSummary) -> Site | None:
    """Where the fix goes: the condition the step runs under (else the step, else the backward).
    For a step inside a helper of the loop: the loop's call of the helper, which passes the
    condition (``update_grad=``) where the helper steps under a condition of its own, else the
    condition the loop calls it under."""
    inner = condition_of(h.step_site)
    if h.step_call is not None:
        return (condition_of(h.step_call) if inner is None else None) or h.step_call
    return inner or h.step_site or h.site


def _pass_starts(history: list[WindowSummary]) -> list[int]:
    starts = [0]
    for i in range(1, len(history)):
        prev, h = history[i - 1], history[i]
        if h.epochs and prev.epochs and h.epochs[0] != prev.epochs[-1]:
            starts.append(i)
    return starts


def _pass_ends(history: list[WindowSummary]) -> list[int]:
    ends = [i - 1 for i in _pass_starts(history)[1:]] + [len(history) - 1]
    ends += [i for i, h in enumerate(history) if h.exhausted]
    return ends
