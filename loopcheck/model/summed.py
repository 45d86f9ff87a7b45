"""A loss summed across iterations and back-propagated at the window's end.

``acc += loss / N`` on the micro-batches, then ``acc.backward(); optimizer.step(); acc = 0`` under
``if (i + 1) % N == 0:``: the window is kept in one graph instead of in ``.grad``, and only its
boundary back-propagates. Read as the loop's accumulation window (a GUARDED view of the loop with
that backward and its step), for the rules about how a window ends; the loop itself keeps the
style it has (one backward per step), since everything about per-micro-batch backward passes
(all-reduces, clipping of partial sums) does not apply to it.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Event, Kind
from loopcheck.model.guards import GuardKind, Phase, exclusive
from loopcheck.model.syntax import conjuncts, dotted, func_name, is_none, is_zero, last_part, method, names_in, walk
from loopcheck.model.training import Style, TrainingLoop

SUMMED = "summed"  # TrainingLoop.notes key: the name of the accumulator a summed window back-propagates


def summed_window(training: TrainingLoop) -> TrainingLoop | None:
    """The view of ``training`` as a window of N summed losses: a backward of a name under a periodic
    boundary test (``(i + 1) % N == 0``), with a step of the same test after it; the name gets each
    other iteration's loss added to it (on every iteration, or in the other branch of that test) and
    is set back to zero in the step's branch after the backward."""
    loop = training.loop
    for backward in training.backwards:
        name = dotted(backward.loss) if isinstance(backward.loss, (cst.Name, cst.Attribute)) else None
        if name is None:
            continue
        guard = training.reader.guard(_without_tests_of(backward.conds, name), backward.order)
        if name is None or guard.kind is not GuardKind.PERIODIC or guard.phase is not Phase.BOUNDARY \
                or guard.partial or guard.modulus is None:
            continue
        adds = [a for a in loop.assignments if a.names == (name,) and _adds_to(a, name)]
        if not adds or not all(_each_other_iteration(training, a, backward) for a in adds):
            continue
        if not any(a.names == (name,) and a.op == "=" and a.order > backward.order and cleared(a.value)
                   and a.conds == backward.conds for a in loop.assignments):
            continue  # never set back: the sum grows over the run (another problem)
        steps = [s for s in loop.events(Kind.STEP) if s.order > backward.order and s.conds[:len(backward.conds)]
                 == backward.conds]
        if steps:
            return replace(training, style=Style.GUARDED, backwards=[backward], steps=steps, step_guard=guard,
                           modulus=guard.modulus, notes={**training.notes, SUMMED: name})
    return None


def _without_tests_of(conds: tuple[Cond, ...], name: str) -> tuple[Cond, ...]:
    """``conds`` less the parts of an ``and`` that test only the sum itself (``acc > 0 and (i + 1) % N
    == 0``): on a boundary something has been summed, so they hold there."""
    out = []
    for cond in conds:
        parts = conjuncts(cond.test) if cond.test is not None and not cond.negated and cond.reads is None else []
        kept = [p for p in parts if names_in(p) != {name}]
        out.append(replace(cond, test=kept[0]) if len(parts) > 1 and len(kept) == 1 else cond)
    return tuple(out)


def _adds_to(assignment: Assignment, name: str) -> bool:
    """``acc += term`` or ``acc = acc + term``, with a term that keeps its graph (no ``.item()``,
    ``.detach()`` or ``float()``)."""
    value = assignment.value
    if assignment.op == "=":
        if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)
                and name in (dotted(value.left), dotted(value.right))):
            return False
    elif assignment.op != "AddAssign":
        return False
    return not any(isinstance(n, cst.Call) and (last_part(func_name(n) or "") in ("float", "int")
                                                or (method(n) or (None, ""))[1] in ("item", "detach", "tolist"))
                   for n in walk(value))


def _each_other_iteration(training: TrainingLoop, added: Assignment, backward: Event) -> bool:
    """The sum grows on every iteration, or on each one the backward does not run (the ``else`` of its test)."""
    if training.reader.guard(added.conds, added.order).always:
        return True
    inner, outer = added.conds, backward.conds
    return len(inner) == len(outer) and inner[:-1] == outer[:-1] and exclusive(inner[-1:], outer[-1:])


def cleared(value: cst.BaseExpression) -> bool:
    """``0``, ``0.0``, ``None``, ``torch.zeros(...)`` / ``torch.tensor(0.0)``."""
    if is_zero(value) or is_none(value):
        return True
    if not isinstance(value, cst.Call):
        return False
    name = last_part(func_name(value) or "")
    return name in ("zeros", "zeros_like") or name == "tensor" and bool(value.args) and is_zero(value.args[0].value)
