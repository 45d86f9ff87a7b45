"""## What it does
Checks for `optimizer.step()` or `backward()` at the wrong nesting level: backward runs for every
batch of a data loop but the step only once after the loop (once per epoch), or backward runs once
after a batch loop that overwrote the loss on every batch, or once after a batch loop whose body
only binds the batch (`for _, batch in enumerate(loader): data, label = batch`, then the zeroing,
forward, `backward()` and step dedented below it: measured on CPU, 3 backward passes instead of 12 in
3 epochs of 4 batches). Not where that loop stops at its first batch (`break`: one batch taken on
purpose) or does nothing (`for x, y, z in loader: pass`, written to take the last batch), runs under a
test, or is a helper's own (a validation pass binding the same names).

## Why is this bad?
One step per epoch accumulates the gradients of the whole epoch into a single update (with the
learning rate tuned for one batch): training is hundreds of times slower and the update
enormous. A single backward after the loop back-propagates only the last batch's loss; every
other batch's forward pass was wasted. An explicit full-batch intent (the loss divided by the
number of batches) is not flagged, nor is a loop over several loaders that draws one batch from
each (`for dl in loaders: batch = next(dl)`): the step after it ends one round of micro-batches. Nor
is a loop that takes the next K-th of one pass over the loader (`for step in range(K):` around `for _
in range(len(loader) // K): batch = next(it)`, `it` made before both): K steps per pass.

## Fix
Indent `optimizer.step()` (and `zero_grad()`) into the batch loop, or move `backward()` there.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Kind, Loop, Style
from loopcheck.model.loss import Scaling, loss_scaling
from loopcheck.model.iterators import taken_from
from loopcheck.model.syntax import calls, dotted, func_name, names_in, positional, same, source, target_names, walk
from loopcheck.model.training import draws_batches, is_data_iterable
from loopcheck.rules._base import Rule, Violation


class StepOutsideBatchLoop(Rule):
    code = "LC108"
    message = "optimizer.step() or backward() sits at the wrong nesting level"

    VALID = [
        """
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
""",
        """
for epoch in range(epochs):
    optimizer.zero_grad()
    for x, y in loader:
        loss = criterion(model(x), y) / len(loader)
        loss.backward()
    optimizer.step()
""",
    ]
    INVALID = [
        """
for epoch in range(epochs):
    optimizer.zero_grad()
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
    optimizer.step()  # LC108
""",
        """
for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()  # LC108
    optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        helpers = model.index.functions
        for training in model.training_loops:
            if training.style is Style.STEP_OUTSIDE:
                backward = training.backwards[0]
                if backward.loss is not None and loss_scaling(backward.loss, training.loop, backward.order, helpers,
                                                              set()) is not Scaling.RAW:
                    continue  # divided by the number of batches: a deliberate full-batch step
                if _draws_from_each(training.loop):
                    continue  # one batch from each of several loaders, then one step: not an epoch
                if _share_of_a_pass(training.loop):
                    continue  # K steps per pass, each after len(loader) // K micro-batches: not an epoch
                step = training.steps[0]
                yield self.at(step, f"`{step.receiver}` steps once after the data loop while backward runs for "
                                    "every batch: one update per epoch from the summed gradients of all batches")
        for backward in model.events(Kind.BACKWARD):
            name = dotted(backward.loss) if backward.loss is not None else None
            if backward.loss is not None and name is None and backward.loop is not None and backward.loop.is_loop:
                batch = _last_batch_read(backward.loop, backward.loss, backward.order, 0)
                if batch is not None:
                    yield self.at(backward, _last_batch_message(source(backward.loss), batch))
                continue
            if name is None or backward.loop is None:
                continue
            assigned = backward.loop.assignments_before(name, backward.order)
            last = assigned[-1] if assigned else None
            if last is not None and last.op == "=" and _over_the_data(last.in_loop):
                yield self.at(backward, f"`{name}` is overwritten on every batch of the loop above and "
                                        "back-propagated once after it: only the last batch trains the model")
            elif last is not None and last.op == "=" and last.in_loop is None and backward.loop.is_loop:
                batch = _last_batch_read(backward.loop, last.value, last.order, 0)
                if batch is not None:
                    yield self.at(backward, _last_batch_message(name, batch))


def _last_batch_message(loss: str, batch: str) -> str:
    return (f"`{loss}` is computed after the loop above from `{batch}`, which that loop binds on every batch: "
            "only its last batch is trained on, once per iteration of this loop")


def _over_the_data(node: cst.CSTNode | None) -> bool:
    """A ``for`` over a loader (not one left early: ``for batch in loader: break`` takes one batch on
    purpose, nor one whose body is only ``pass``: ``for x, y in loader: pass`` is written to reach
    the last batch, where a dedent would have left the body's statements behind)."""
    return isinstance(node, cst.For) and is_data_iterable(node.iter) \
        and not any(isinstance(n, cst.Break) for n in walk(node.body)) and not _passes_only(node.body)


def _passes_only(body: cst.BaseSuite) -> bool:
    lines = body.body if isinstance(body, cst.IndentedBlock) else (body,)
    return all(isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and all(
        isinstance(small, cst.Pass) or isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis)
        for small in line.body) for line in lines)


def _last_batch_read(loop: Loop, expr: cst.BaseExpression, order: int, depth: int) -> str | None:
    """A name ``expr`` reads (through the loop's own assignments before ``order``) that a data loop
    lifted into ``loop`` binds last (``for x, y in loader: x, y = x.cuda(), y.cuda()``, then
    ``loss = criterion(model(x), y)`` after it): the loss is the last batch's."""
    for name in sorted({n.split(".", 1)[0] for n in names_in(expr)}):
        # a helper's own names are not the loop's (`for data, target in self.val_loader:` in `validate()`)
        assigned = [a for a in loop.assignments_before(name, order) if a.scope is None or a.scope[0] <= order < a.scope[1]]
        if not assigned:
            continue
        last = assigned[-1]
        data = last.in_loop if last.op == "=" else last.node
        if last.op in ("=", "for") and data is not loop.node and _over_the_data(data):
            header = next((a for a in loop.assignments if a.op == "for" and a.node is data), None)
            if header is not None and not header.conds:  # not a loop run only on some iterations
                return name
            continue
        if last.op == "=" and last.in_loop is None and depth < 3:
            found = _last_batch_read(loop, last.value, last.order, depth + 1)
            if found is not None:
                return found
    return None


def _share_of_a_pass(loop: Loop) -> bool:
    """``for step in range(K): for _ in range(len(loader) // K): batch = next(it)`` with ``it`` made
    before the outer loop (PPO's actor update, ``optimizer_step_times`` steps over one rollout): each
    outer iteration takes the next K-th of one pass over the loader, so the step after the inner
    loop ends a window of ``len(loader) // K`` micro-batches, not an epoch."""
    parent = loop.parent
    if parent is None or not parent.is_loop or not draws_batches(loop):
        return False
    share, count = _range_bound(loop.iter), _range_bound(parent.iter)
    if not (isinstance(share, cst.BinaryOperation) and isinstance(share.operator, cst.FloorDivide)
            and isinstance(share.left, cst.Call) and func_name(share.left) == "len" and count is not None
            and same(share.right, count)):
        return False
    drawn = {dotted(taken_from(a.value)) for a in loop.assignments
             if a.op == "=" and type(a.value) is cst.Call and taken_from(a.value) is not None}
    return not any(drawn & set(a.names) for a in parent.assignments)  # not a new iterator per share


def _range_bound(iterable: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``n`` of ``range(n)``."""
    if not (isinstance(iterable, cst.Call) and func_name(iterable) == "range"):
        return None
    args = positional(iterable)
    return args[0] if len(args) == 1 else None


def _draws_from_each(loop: Loop) -> bool:
    """``for data_loader in dataloaders: batch = next(data_loader)``: the loop goes over loaders (or
    iterators), drawing one batch from each, so the step after it ends a round of micro-batches."""
    target = loop.target
    if target is None:
        return False
    drawn = set(target_names(target))
    return any(func_name(call) == "next" and call.args and dotted(call.args[0].value) in drawn
               for call in calls(loop.node.body))
