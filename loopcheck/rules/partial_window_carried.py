"""## What it does
Checks gradient-accumulation loops over a data loader whose step condition never fires for the
last, partial window of an epoch: `(i + 1) % N == 0`, `i % N == 0`, a counter that restarts each
epoch (set before the batch loop, or reset after it in the epoch loop: `nb_tr_steps = 0` after the
evaluation of the old Hugging Face scripts), a threshold such as `n >= N` reset after the step, or a
global counter whose windows are cut by a zeroing at each epoch start. A 0-based `i % N == 0` step leaves no window partial unless
a zeroing at each epoch start wipes the tail: without one, the tail is stepped together with the
next epoch's first micro-batch (its wrong phase is LC106's finding). An exit at the top of the
batch loop that can end a pass early (`if step >= steps_per_epoch: break`) may leave no window
partial; one on a counter that no pass restarts, restating the run's bound (`while step <= total:`
around `if step > total: break`), ends only the last pass, so every other pass still leaves its tail. A short run for debugging
(`if args.debug and step > 5: break`) is no real pass's end, nor is a break on a value the index
never takes (`if i == self.break_iter: break` with `self.break_iter = -1` the only value the file
gives it, or an option defaulting to -1), nor a flag the pass sets only right before it breaks
out itself (`if state["stop"]: break` at the top, `state["stop"] = True; break` after a max-steps
test): within a pass it does not change, so it ends a pass before its first batch or not at all.
A loader that never ends a pass (`cycle(loader)`, or `DataLoader(dataset,
sampler=InfiniteSampler(dataset))`, its sampler's name saying so, also in a dict of the loader's
arguments) has no partial window, and a single pass the run makes once (at module level, or in a
function called only outside loops, from `if __name__ == "__main__":` or from a `main()` called
so) leaves its leftover micro-batches once, at the end of the run. A loop that renews its exhausted
iterator by hand (`try: batch = next(it)` / `except StopIteration: it = iter(loader)`) with a
counter that runs on keeps whole windows across passes, unless the renewal also zeroes the gradients
the step uses, itself or in a helper it calls there (an evaluation that back-propagates dev batches
and runs `model.zero_grad()`): the window that spans the two passes then loses its first part. A step condition written as a
predicate of the file (`def should_step(i, n): return (i + 1) % n == 0`, then `if should_step(i, n):`)
is read as the expression it returns for the call's arguments. A loss summed as a graph over the
window (`acc += loss / N` on the micro-batches, `acc.backward(); optimizer.step(); acc = 0` under the
step condition) is such a window too: where each pass sets the sum again before its loop (a local of
the epoch function, `acc = 0` before the batch loop), the losses summed after the last step of a
pass are never back-propagated.

## Why is this bad?
When the number of batches is not a multiple of N, the gradients of the last few batches of
every epoch are never stepped on their own. They are *carried* into the first step of the next
epoch (a window of more than N micro-batches, weighted wrongly: the worse case) or *dropped*:
wiped by the zeroing before the next epoch's first window, so those batches never train the model.

## Fix
Also step on the last batch: `if (i + 1) % N == 0 or (i + 1) == len(loader):`. A negated test
narrows instead: `if (i + 1) % N != 0 and (i + 1) != len(loader): continue`. `--fix` extends every
test of the loop that means the window boundary (`update_grad=...`, the zeroing, a `no_sync()`
branch), so they keep pairing. Or step the leftover window after the loop. No fix is offered for a
counter that runs on across epochs, nor for a condition that calls a predicate of the file (the
last-batch test belongs in the predicate, which other callers may share). Where the loop can `break` or
`return` (a batch cap an option turns on, a debug stop) the fix is unsafe: a run that takes that exit
ends the pass before the last batch, and its tail stays unstepped. So is it where a scheduler steps with
the optimizer, one step a call: the extra step each pass then takes may run it past a horizon counted
in whole windows (`len(loader) // N * epochs`), where a cosine schedule climbs again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import libcst as cst

from loopcheck.fixes import Edit, Fix
from loopcheck.model import Assignment, FileModel, GuardKind, Kind, Loop, Phase, TrainingLoop
from loopcheck.model.guards import Guard, enumerate_start, slipped, unwrap_iterable
from loopcheck.model.syntax import children, func_name, int_value, names_in, positional, same, source, walk
from loopcheck.model.values import accumulation_gates_nothing
from loopcheck.model.summed import summed_window
from loopcheck.model.windows import Tail, partial_window, zeroed_before_the_last_backward
from loopcheck.rules._base import Rule, Violation


class PartialWindowCarried(Rule):
    code = "LC105"
    message = "the last, partial accumulation window of each epoch is never stepped"
    fixable = True

    VALID = [
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    if len(loader) % accum != 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
global_step = 0
for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y) / accum
        loss.backward()
        global_step += 1
        if global_step % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
""",
        """
def cycle(dl):
    while True:
        yield from dl

for step, (x, y) in enumerate(cycle(loader)):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        need_update = False
        if (i + 1) % accum == 0 or i == len(loader) - 1:
            need_update = True
        loss = criterion(model(x), y) / accum
        loss.backward()
        if need_update:
            optimizer.step()
            optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:  # LC105
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    optimizer.zero_grad()
    for step, batch in enumerate(tqdm(loader)):
        loss = model(**batch).loss / accum
        loss.backward()
        if (step + 1) % accum == 0:  # LC105
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    n = 0
    for x, y in loader:
        loss = criterion(model(x), y) / accum
        loss.backward()
        n += 1
        if n >= accum:  # LC105
            optimizer.step()
            optimizer.zero_grad()
            n = 0
""",
        """
def train_epoch(model, loader, optimizer):
    summed = 0
    for i, (x, y) in enumerate(loader):
        summed += criterion(model(x), y) / accum
        if (i + 1) % accum == 0:  # LC105
            optimizer.zero_grad()
            summed.backward()
            optimizer.step()
            summed = 0

for epoch in range(epochs):
    train_epoch(model, loader, optimizer)
""",
        """
last_opt_step = -1
for epoch in range(epochs):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        ni = i + nb * epoch
        loss = criterion(model(x), y)
        loss.backward()
        if ni - last_opt_step >= accumulate:  # LC105
            optimizer.step()
            optimizer.zero_grad()
            last_opt_step = ni
""",
        """
for epoch in range(epochs):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if i % accum == 0:  # LC105
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    pbar = enumerate(train_loader)
    if is_main:
        pbar = tqdm(pbar)
    for i, (x, y) in pbar:
        loss = criterion(model(x), y) / accum
        if args.amp:
            scaler.scale(loss).backward()
            if (i + 1) % accum == 0:  # LC105
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        else:
            loss.backward()
            if (i + 1) % accum == 0:  # one pitfall of one loop: reported once, above
                optimizer.step()
                optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        done: set[int] = set()  # loops reported: one finding per loop, in however many variants it shows
        for training in [*model.training_loops, *filter(None, map(summed_window, model.training_loops))]:
            if id(training.loop.node) in done:
                continue
            window = partial_window(model, training)
            guard = training.step_guard
            if window is None or guard is None or guard.test is None:
                continue
            if accumulation_gates_nothing(training, model.index):
                continue  # N is 1 as shipped: no window is ever partial
            if slipped(guard.test) is not None:
                continue  # `i + 1 % N == 0` steps on no window boundary at all (LC106 says so)
            step = next(s for s in training.steps if training.guard(s).periodic)
            if any(zeroed_before_the_last_backward(training, z, step) for z in training.step_loop.events(Kind.ZERO_GRAD)):
                continue  # every step sees its last micro-batch only (LC104): a carried tail is wiped too
            owner = next((c.owner for c in step.conds if c.test is guard.test), step.stmt)
            target = training.loop.assignments[0] if training.loop.assignments else None
            last = None
            if guard.phase is Phase.BOUNDARY and target is not None and target.op == "for" \
                    and guard.index in target.names:
                last = _last_batch_test(target.value, guard.index, _start(training, target, guard.index, step.order))
            # a test calling a predicate of the file (`if should_step(i):`) is fixed in the predicate,
            # which other callers may share: no fix
            called = any(c.test is guard.test and c.reads is not None for c in step.conds)
            fix = _also_last(training, guard, last) if last and not window.spans_epochs and not called \
                and window.summed is None else None
            if fix is not None and _exits_early(training.loop):
                # `if args.minibatch_num_train > 0 and i >= ...: break`: a run that asks for the exit ends the
                # pass before the last batch, so the last-batch test does not step its tail there
                fix = replace(fix, safe=False)
            if fix is not None and any(training.guard(e).periodic and not e.has_args
                                       for e in training.events(Kind.SCHEDULER_STEP)):
                # the scheduler steps with the optimizer: one more step a pass may take it past a horizon
                # counted in whole windows (`len(loader) // N * epochs`), where a cosine climbs again (one
                # told where it stands, `step_update(epoch * num_steps + i)`, is not advanced by a step)
                fix = replace(fix, safe=False)
            # advice only: a step counter other than the loop's index still steps on the loop's last batch
            hint = last or (_last_batch_test(target.value, target.names[0],
                                             _start(training, target, target.names[0], step.order),
                                             through_log_every=True)
                            if target is not None and target.op == "for" and target.names else None)
            if hint is None and target is not None and target.op == "for":
                hint = _counted_last_batch(guard, target.value)
            add = f"add `or {hint or '(i + 1) == len(loader)'}` to the step condition"
            if _short_pass_only(training, guard):
                add = "its last-batch test holds only in an epoch of at most N batches; " + add
            zeroing = f"`{window.zeroing.receiver}.zero_grad()`" if window.zeroing is not None else "the zeroing"
            if window.at_refresh and window.zeroing is not None:
                origin = window.zeroing.origin
                inside = origin is not None and origin is not training.loop.function
                helper = f" (in `{origin.name.value}()`)" if inside and origin is not None else ""
                message = (f"the accumulation window that spans two passes over the data loses its first part: "
                           f"{zeroing}{helper}, run where the exhausted iterator is renewed, wipes the gradients of "
                           "the last micro-batches of the pass before, and the next step then comes after fewer "
                           "than N micro-batches")
            elif window.summed is not None:
                message = ("when the number of batches is not a multiple of the accumulation count, the last, "
                           f"partial window of each epoch is never back-propagated: the losses summed into "
                           f"`{window.summed}` since the last step are dropped, as each pass starts the sum again "
                           "before its loop, so those batches never train the model; " + add)
            elif window.spans_epochs:
                message = (f"the accumulation window that spans two epochs loses its first part: {zeroing} at "
                           "the start of each epoch wipes the gradients of the last micro-batches of the epoch "
                           "before, and the next step then comes after fewer than N micro-batches")
            elif window.tail is Tail.CARRIED:
                message = ("when the number of batches is not a multiple of the accumulation count, the last, "
                           "partial window of each epoch is never stepped: its gradients are carried into the "
                           "next epoch's first step, which then sums more than N micro-batches; " + add)
            else:
                message = ("when the number of batches is not a multiple of the accumulation count, the last, "
                           f"partial window of each epoch is never stepped: {zeroing} wipes its gradients before "
                           "the next step, so those batches never train the model; " + add)
            done.add(id(training.loop.node))
            yield Violation(guard.test, owner, message, fix)


def _short_pass_only(training: TrainingLoop, guard: Guard) -> bool:
    """The step condition has a last-batch test, but for an epoch no longer than N only
    (``len(loader) <= N and (i + 1) == len(loader)``)."""
    test = guard.test
    if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or)):
        return False
    for part in (test.left, test.right):
        atom = training.reader.atom(part, False, None, 0)
        if atom.kind is GuardKind.LAST and atom.partial and same(atom.modulus, guard.modulus):
            return True
    return False


def _exits_early(loop: Loop) -> bool:
    """The loop's body (not a loop inside it) can ``break`` or ``return``."""
    stack: list[cst.CSTNode] = [loop.node.body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Break or kind is cst.Return:
            return True
        if kind not in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda):
            stack.extend(children(node))
    return False


def _also_last(training: TrainingLoop, guard: Guard, last: str) -> Fix | None:
    """Extend every test of the loop that means "this is the accumulation boundary" (the step's, and
    the copies that pair with it: ``update_grad=``, the zeroing, a ``no_sync`` branch), each with
    its polarity: ``boundary or last`` and ``not_boundary and not last``. Where another test on the
    same window reads differently, extending only some of them would pair the wrong iterations."""
    negated = last.replace(" == ", " != ")
    edits = []
    for test, parent in _tests(training.loop.node):
        atom = training.reader.atom(test, False, None, 0)
        if atom.kind not in (GuardKind.PERIODIC, GuardKind.NOT_PERIODIC) or atom.modulus is None:
            continue
        if not same(atom.modulus, guard.modulus) or atom.phase is Phase.START:
            continue
        if atom.index != guard.index or atom.phase is not Phase.BOUNDARY:
            return None
        text = f"{source(test)} or {last}" if atom.kind is GuardKind.PERIODIC else f"{source(test)} and {negated}"
        if isinstance(parent, (cst.BooleanOperation, cst.UnaryOperation)) or "\n" in text:
            text = f"({text})"  # a test written over several lines (a keyword argument) holds together in brackets
        try:
            edits.append(Edit(test, replacement=cst.parse_expression(text)))
        except cst.ParserSyntaxError:
            return None
    if not any(e.target is guard.test for e in edits):
        return None  # the step's test is not written in this loop (an alias, a helper)
    return Fix(f"also step when `{last}`", tuple(edits))


def _tests(loop: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
    """Expressions of ``loop``'s body used as truth values: comparisons anywhere, and bare
    ``(i + 1) % N`` as the test of an ``if``/``while``/conditional expression or a boolean operand."""
    out = []
    stack: list[cst.CSTNode] = [loop]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        for child in children(node):
            if isinstance(child, cst.Comparison) or isinstance(child, cst.BinaryOperation) and isinstance(
                    child.operator, cst.Modulo) and _truth_position(node, child):
                out.append((child, node))
                continue
            stack.append(child)
    return out


def _truth_position(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
        return parent.test is child
    return isinstance(parent, cst.BooleanOperation) or isinstance(parent, cst.UnaryOperation) and isinstance(
        parent.operator, cst.Not)


def _counted_last_batch(guard: Guard, iterable: cst.BaseExpression) -> str | None:
    """``step == len(bar)`` for ``for batch in bar:`` stepping on ``step % N == 0``, where ``step``
    counts the epoch's micro-batches (it starts again each pass and the test fires on the last
    micro-batch of a window): the counter the step tests reaches the epoch's length on its last batch."""
    if guard.phase is not Phase.BOUNDARY or guard.restarts is not True or guard.index is None \
            or guard.modulus is None or guard.test is None:
        return None
    loader = unwrap_iterable(iterable)
    if not isinstance(loader, (cst.Name, cst.Attribute)):
        return None
    for node in walk(guard.test):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) \
                and same(node.right, guard.modulus) and guard.index in names_in(node.left) \
                and (isinstance(node.left, cst.Name) or isinstance(node.left, cst.BinaryOperation)
                     and isinstance(node.left.operator, cst.Add) and int_value(node.left.right) == 1):
            return f"{source(node.left)} == len({source(loader)})"
    return None


def _start(training: TrainingLoop, target: Assignment, index: str, order: int) -> int | None:
    """The value ``index`` has at the step's test on the first batch: the ``for``'s start, plus what
    the body adds to it before the test (``for step, data in enumerate(bar): step += 1``)."""
    start, shift = enumerate_start(target, index), training.reader.shifted_before(index, order)
    return start + shift if start is not None and shift is not None else None


def _last_batch_test(iterable: cst.BaseExpression, index: str, start: int | None,
                     through_log_every: bool = False) -> str | None:
    """``(i + 1) == len(loader)`` for ``for i, batch in enumerate(loader)`` (also for
    ``enumerate(metric_logger.log_every(loader, ...))`` where ``through_log_every``: the advice's
    test, not the fix's)."""
    iterable = unwrap_iterable(iterable)
    if isinstance(iterable, cst.Call) and func_name(iterable) == "range" and len(positional(iterable)) == 1:
        return f"({index} + 1) == {source(positional(iterable)[0])}"  # `for step in range(len(xs) // bs)`
    if not isinstance(iterable, cst.Call) or func_name(iterable) != "enumerate" or start not in (0, 1):
        return None
    args = positional(iterable)
    loader = unwrap_iterable(args[0], through_log_every) if args else None
    if loader is None or isinstance(loader, cst.Call):
        return None
    return f"({index} + 1) == len({source(loader)})" if start == 0 else f"{index} == len({source(loader)})"
