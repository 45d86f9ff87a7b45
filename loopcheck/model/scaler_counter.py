"""A loss-scaling helper of another module (``loss_scaler(loss, optimizer, ...)``, the timm/DeiT
shape) that the loop hands its iteration counter before the call (``loss_scaler.set_iters(ii)``):
such a helper may step only at the end of each window (ViTs-vs-CNNs' AccumulativeScaler steps when
``(iteration + 1) % forward_time == 0``), so the loop is an accumulation loop in disguise."""

from __future__ import annotations

import libcst as cst

from loopcheck.model.events import Event, Framework, Kind
from loopcheck.model.syntax import dotted, names_in, walk
from loopcheck.model.training import TrainingLoop


def told_the_iteration(training: TrainingLoop, step: Event) -> bool:
    """The loop calls a method of the step's scaler with its own loop counter as an argument."""
    if step.framework is not Framework.LOSS_SCALER or not step.scaler:
        return False
    loop = training.loop.node
    if not isinstance(loop, cst.For):
        return False
    counters = names_in(loop.target)
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and dotted(n.func.value) == step.scaler
               and any(names_in(a.value) & counters for a in n.args) for n in walk(loop.body))


def zeroes_per_window(training: TrainingLoop) -> bool:
    """Every zeroing of the loop runs under an ``if`` that tests the loop counter modulo something
    (``if (ii + 1) % 4 == 0: optimizer.zero_grad()``), and there is one."""
    loop = training.loop.node
    if not isinstance(loop, cst.For):
        return False
    counters = names_in(loop.target)
    zeros = [z.node for z in training.events(Kind.ZERO_GRAD)]
    windows = [n for n in walk(loop.body) if isinstance(n, cst.If) and any(
        isinstance(b, cst.BinaryOperation) and isinstance(b.operator, cst.Modulo) and names_in(b.left) & counters
        for b in walk(n.test))]
    inside = {id(z) for w in windows for z in walk(w.body)}
    return bool(zeros) and all(id(z) in inside for z in zeros)
