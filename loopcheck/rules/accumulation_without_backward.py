"""## What it does
Checks for "accumulation" loops where the loss of every micro-batch is computed but only the
loss of the last one reaches `backward()`: backward sits in the step branch, or after an inner
micro-step loop that overwrites the loss.

## Why is this bad?
The gradients of N-1 of N micro-batches are never computed: the forward passes are wasted, the
effective batch is one micro-batch, and the loss divided by N makes each step N times too small.

Backward passes in complementary branches of the boundary test (`if not boundary: with
model.no_sync(): ...backward()` / `else: ...backward(); optimizer.step()`) run once on every
micro-batch: that is not this problem. Nor is an update every N iterations whose branch zeroes the
gradients of the optimizer it steps before its backward (`if step % policy_update_period == 0:
opt.zero_grad(); loss.backward(); opt.step()`, an RL update period): nothing is accumulated
between updates, and the losses of the other iterations feed statistics. A loss divided by that
same N before its backward (`train_loss /= cfg.gradient_accumulation_steps`, then `if (step + 1) %
cfg.gradient_accumulation_steps == 0: optimizer.zero_grad(); train_loss.backward(); optimizer.step()`)
is scaled as one of N micro-batches meant to be summed: the other N-1 are thrown away, and that is flagged.
So is a step taken once a count of samples reaches a threshold (`accumulated_samples +=
predictions.shape[0]`; `if accumulated_samples < 128:` collect predictions, `else: loss.backward();
optimizer.step(); accumulated_samples = 0`), also where the loss is rescaled by a running count
(`loss = loss / accumulation_steps`) or computed under a condition the backward shares (`if
predictions.shape[0] != 0:`).

## Fix
Call `backward()` on every micro-batch and keep only `optimizer.step()` in the step branch.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import Event, FileModel, Kind, Style, TrainingLoop
from loopcheck.model.syntax import dotted, last_part, names_in, walk
from loopcheck.model.training import is_data_iterable, one_micro_batch_loss, zeroed_for_the_step
from loopcheck.rules._base import Rule, Violation


class AccumulationWithoutBackward(Rule):
    code = "LC113"
    message = "micro-batches are collected for accumulation but never back-propagated"

    VALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    total = total + criterion(model(x), y) / accum
    if (i + 1) % accum == 0:
        total.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = 0
""",
        """
for x, y in loader:
    total_loss = torch.zeros(1)
    for a, b in pairs:
        total_loss = total_loss + criterion(model(x[a]), y[a]) + criterion(model(x[b]), y[b])
    optimizer.zero_grad()
    total_loss.backward()
    optimizer.step()
""",
        """
def validate(model, data):
    model.eval()
    for k in range(eval_iters):
        loss = criterion(model(data[k]), targets[k])
    model.train()
    return loss

while True:
    if step % eval_interval == 0:
        validate(model, val_data)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    boundary = (i + 1) % accum == 0
    if not boundary:
        with model.no_sync():
            loss = criterion(model(x), y) / accum
            loss.backward()
    else:
        loss = criterion(model(x), y) / accum
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    if (i + 1) % accum == 0:
        loss.backward()  # LC113
        optimizer.step()
        optimizer.zero_grad()
""",
        """
while True:
    for micro_step in range(grad_accum):
        logits, loss = model(*get_batch())
        loss = loss / grad_accum
    loss.backward()  # LC113
    optimizer.step()
    optimizer.zero_grad()
""",
        """
for step, (x, y) in enumerate(loader):
    train_loss = criterion(model(x), y)
    if cfg.gradient_accumulation_steps > 1:
        train_loss /= cfg.gradient_accumulation_steps
    if (step + 1) % cfg.gradient_accumulation_steps == 0:
        optimizer.zero_grad()
        train_loss.backward()  # LC113
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            # an update every N iterations (read as one backward per step) whose loss is divided by N
            if training.style not in (Style.GUARDED, Style.PLAIN):
                continue
            for backward in training.backwards:
                if training.style is Style.PLAIN and not training.guard(backward).periodic \
                        or training.every_iteration(backward):
                    continue  # the other micro-batches back-propagate in the complementary branch
                if (training.style is Style.PLAIN or zeroed_for_the_step(training.loop, training.reader, backward)) \
                        and not _divided_by_period(training, backward):
                    continue  # an update every N iterations that keeps nothing between them
                if training.guard(backward).periodic and one_micro_batch_loss(training, backward):
                    yield self.at(backward, "backward runs only on the step's micro-batch: the losses of the "
                                            "other micro-batches in the window are computed and thrown away")
        for backward in model.events(Kind.BACKWARD):
            name = dotted(backward.loss) if backward.loss is not None else None
            if name is None or backward.loop is None or not backward.loop.events(Kind.STEP, deep=True):
                continue  # no step trains on it: a module test repeating a forward for its statistics
            assigned = backward.loop.assignments_before(name, backward.order)
            if assigned and assigned[-1].op == "=" and isinstance(assigned[-1].in_loop, cst.For) and not \
                    is_data_iterable(assigned[-1].in_loop.iter) and not _adds_to_itself(name, assigned[-1].value):
                yield self.at(backward, f"`{name}` is overwritten on every micro-step of the loop above and "
                                        "back-propagated once after it: only the last micro-batch trains the model")


def _divided_by_period(training: TrainingLoop, backward: Event) -> bool:
    """The loss back-propagated is divided by the N of the step's periodic test (``loss /= N``,
    ``loss = loss / N``, ``(loss / N).backward()``): scaled as one of N micro-batches to be summed."""
    name = dotted(backward.loss) if backward.loss is not None else None
    modulus = training.guard(backward).modulus
    if modulus is None or backward.loss is None:
        return False
    counts = {last_part(n) for n in names_in(modulus)}
    values = [backward.loss]
    for assignment in reversed(backward.loop.assignments_before(name, backward.order) if name is not None else []):
        if assignment.op == "DivideAssign" and counts & {last_part(n) for n in names_in(assignment.value)}:
            return True
        if assignment.op == "=":  # the value back-propagated starts here
            values.append(assignment.value)
            break
    return any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide)
               and counts & {last_part(n) for n in names_in(node.right)} for value in values for node in walk(value))


def _adds_to_itself(name: str, value: cst.BaseExpression) -> bool:
    """``total = total + a + b``: a sum over the inner loop (``loss = loss / N`` still overwrites)."""
    terms = [value]
    while terms:
        term = terms.pop()
        if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Add):
            terms += [term.left, term.right]
        elif dotted(term) == name:
            return True
    return False
