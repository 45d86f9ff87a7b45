"""## What it does
Checks for an optimizer stepped twice on the same gradients in one iteration, e.g.
`scaler.step(optimizer)` followed by a leftover `optimizer.step()`, or stepped again after a
second backward with nothing zeroing its gradients between the two steps (a second loss whose
step names the wrong optimizer, a second GradScaler stepping the first one's optimizer), or stepped on every micro-batch beside its step at
the accumulation boundary (`if (i + 1) % N == 0: optimizer.step(); optimizer.zero_grad()` and then a
leftover `optimizer.step()`).

A LightningModule's `optimizer_step` hook that steps with its closure
(`self.optimizer.step(optimizer_closure)`) and then calls `super().optimizer_step(...)`, whose
default body is `optimizer.step(closure=optimizer_closure)`, steps twice per batch and runs
`training_step` and `backward` twice (two steps with the closure in a straight run of the hook's
statements; not in branches of a test, and not where the module turns automatic optimization off).

A step under a test that the optimizer has no state yet (`if len(optimizer.state_dict()["state"]) == 0:`,
`if not optimizer.state:`), in the file or in a helper of another module, only creates that state
(horovod's `broadcast_optimizer_state` steps once on zeroed gradients): it never runs after a step and
is not a second one.

## Why is this bad?
The second step applies the same gradients again: for SGD a doubled learning rate, for Adam a
second moment update from stale gradients, and under AMP an update that bypasses the scaler's
inf/NaN check. A backward between the two steps adds to the gradients the first step used; it does
not replace them, so without a zeroing between, the first loss's gradients are applied twice.

## Fix
Keep exactly one step per optimizer per iteration.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Framework, Kind, Style, TrainingLoop
from loopcheck.model.events import Event, Loop
from loopcheck.model.from_ast import start
from loopcheck.model.lightning_hooks import restepped
from loopcheck.model.syntax import same, source
from loopcheck.rules._base import Rule, Violation


class DoubleStep(Rule):
    code = "LC109"
    message = "the optimizer steps twice on the same gradients in one iteration"

    VALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
        """
for x, y in loader:
    for closure in closures:
        optimizer.step(closure)
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
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
    optimizer.step()  # LC109
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.step()  # LC109
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    optimizer_st.zero_grad()
    out, stop = model(x)
    losses = criterion(out, stop, y)
    scaler.scale(losses["loss"]).backward()
    scaler.step(optimizer)
    scaler.update()
    if separate_stopnet:
        scaler_st.scale(losses["stopnet_loss"]).backward()
        scaler_st.step(optimizer)  # LC109
        scaler_st.update()
""",
    ]

    # a Lightning `optimizer_step` hook, in a file with no training loop of its own
    without_training_loop = ("optimizer_step(",)

    def check(self, model: FileModel) -> Iterator[Violation]:
        for second, stmt, first in restepped(model.module):
            again = "`super().optimizer_step(...)` steps again with it (Lightning's default hook is " \
                "`optimizer.step(closure=optimizer_closure)`)" if second.func.attr.value == "optimizer_step" \
                else "this call steps again with it"  # type: ignore[attr-defined]
            yield Violation(second, stmt, f"this `optimizer_step` hook already stepped with its closure "
                                          f"(`{source(first)}`); {again}: every batch runs `training_step` and "
                                          "`backward` twice and the optimizer steps twice")
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.NO_STEP):
                continue
            steps = [s for s in training.steps if not s.closure and s.framework is not Framework.ENGINE]
            backwards = training.step_loop.events(Kind.BACKWARD, deep=True)
            for first, second in zip(steps, steps[1:]):
                if first.optimizer != second.optimizer:
                    continue
                if not any(first.order < b.order < second.order for b in backwards):
                    if first.conds == second.conds:
                        yield self.at(second, f"`{second.optimizer}` already stepped earlier in this iteration "
                                              "with no backward since: the same gradients are applied twice")
                    elif _boundary_and_every_batch(training, first, second):
                        boundary = source(first.conds[-1].test)  # type: ignore[arg-type]
                        zeroed = any(first.order < z.order < second.order
                                     for z in training.step_loop.events(Kind.ZERO_GRAD, deep=True))
                        twice = "" if zeroed else ", and the boundary micro-batch steps twice"
                        yield self.at(second, f"`{second.optimizer}` steps here on every micro-batch, and also under "
                                              f"`{boundary}` just before: the accumulation that test sets up never "
                                              "happens (each micro-batch steps on what was summed since the last "
                                              f"zeroing){twice}")
                elif _restepped(training.step_loop, first, second, backwards):
                    yield self.at(second, f"`{second.optimizer}` already stepped earlier in this iteration and "
                                          "nothing zeroed its gradients since: the backward in between adds to "
                                          "them, so the first step's gradients are applied a second time")


def _boundary_and_every_batch(training: TrainingLoop, first: Event, second: Event) -> bool:
    """``first`` steps at the accumulation boundary (``if (i + 1) % N == 0: optimizer.step()``) and
    ``second``, later in the iteration, on every micro-batch that ``first``'s other conditions let
    through (its conditions are a strict prefix of ``first``'s)."""
    return len(second.conds) < len(first.conds) and first.conds[:len(second.conds)] == second.conds \
        and training.guard(first).periodic and training.guard(second).always


def _restepped(loop: Loop, first: Event, second: Event, backwards: list[Event]) -> bool:
    """``second`` steps ``first``'s optimizer again after the backward of another loss, nothing
    between them clears gradients (no zeroing of any kind, no call the model cannot see into that is
    handed an optimizer), and ``second`` runs only where ``first`` ran (its conditions extend
    ``first``'s). The same loss computed again and stepped again is a test replaying one iteration
    (around a checkpoint reload), not a second objective meant for another optimizer."""
    if second.conds[:len(first.conds)] != first.conds:
        return False
    before = [b.loss for b in backwards if b.order < first.order]
    between = [b.loss for b in backwards if first.order < b.order < second.order]
    if not before or any(loss is None for loss in before + between) \
            or not any(all(not same(loss, earlier) for earlier in before) for loss in between):
        return False
    if any(first.order < z.order < second.order for z in loop.events(Kind.ZERO_GRAD, deep=True)):
        return False
    return not any(_between(loop, call, first, second) for call in loop.opaque_calls)


def _between(loop: Loop, call: cst.Call, first: Event, second: Event) -> bool:
    """An opaque call of ``loop`` that sits in source between the two steps (opaque calls carry no
    execution order; their place in the source stands in for it). Unknown places count as between."""
    low, high, at = start(first.node), start(second.node), start(call)
    return low is None or high is None or at is None or low < at < high
