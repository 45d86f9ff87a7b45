"""## What it does
Checks accumulation step conditions that fire on the wrong micro-batch: `i % N == 0` with a
0-based `i` after `backward()`, or `(i + 1) % N == 0` with a counter that already starts at 1.
Counters are read as real code writes them: `enumerate(loader, start=...)` (a resumed start is
read as its fresh-run value, `start_step = 0`; `step += 1` first thing in the body makes the index
1-based), `step += 1` before or after the test, global
counters (`global_step`, `ni = i + nb * epoch`) and thresholds reset in the step branch
(`n += 1; if n > N: ...; n = 0` makes every window N + 1 long, as does `if n == N: n = 0; step`
with `n += 1` only in its `else`: the count stands still on the micro-batch that steps). A counter that an evaluation
branch resets to its first value (`nb_tr_steps = 0` beside `nb_tr_steps = 0` before the loop) starts
again as on a fresh run, so its test is read the same way. A test that lost its parentheses,
`i + 1 % N == 0`, is `i + (1 % N) == 0`: `%` binds before `+`, so it holds on no micro-batch once N > 1
(on the first only where N is 1); it is reported whatever N is (measured on CPU: 3 steps instead of 24
in 3 epochs of 32 batches at N = 4, where the test also takes the last batch). A test with its polarity
inverted, `if batches_done % N:` (or `!= 0`) around the step of a loop that back-propagates every
micro-batch, steps on every micro-batch but each N-th: windows of one and two micro-batches from N = 3 on
(a literal 2 happens to step every second micro-batch of a 0-based count, and is not reported).

Inside Accelerate, `accelerator.accumulate()` entered more than once on every micro-batch (`with
accelerator.accumulate(actor), accelerator.accumulate(critic):`, or two such blocks in a row) counts
each entry as a micro-batch: with an even N the optimizers step every N/2 micro-batches (run on CPU with
N = 4: on micro-batches 1, 3, 5, ... instead of 3, 7, 11, ...; benchmarks/results/accelerate-accumulate-twice-s31),
and where the blocks come one after the other, the first block's optimizer never steps at all (N = 4: the
second block steps on 1, 3, 5, ..., the first on none; benchmarks/results/accelerate-accumulate-in-a-row-s33).
One entry takes every model: `accelerator.accumulate(actor, critic)`.

## Why is this bad?
`i % N == 0` is true on the very first micro-batch, so the first "window" has one micro-batch
and the loss division by N makes that step N times too small; with a 1-based counter,
`(i + 1) % N == 0` steps after N-1 micro-batches. Every later window is shifted, and the
windows no longer line up with the epoch.
Not reported where the gradients are zeroed on every micro-batch (outside the step branch): each
step sees one micro-batch whichever the test picks, and that zeroing is the finding (LC101). Nor where
the counter starts only once in the run (a `global_step` that runs on across epochs with nothing
zeroing the gradients between them, or a `while step < total_steps:` loop that is the run's only pass):
the shifted test then makes the run's first window one micro-batch short or long, and every later window
is N long (outside reviews judged such findings false: TaCL's first step ran at learning rate 0 in its
warmup). With a zeroing at each epoch's start the shift recurs every epoch and is reported: for
`global_step % N == 0` every epoch that starts on a multiple of N (8 batches an epoch, N = 4: windows of
1, 4, 1, 4, ...) steps after its first micro-batch; the tail the zeroing wipes is LC105's.

## Fix
Test the 0-based index with `(i + 1) % N == 0` (or a 1-based counter with `i % N == 0`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Kind, Phase, Style, TrainingLoop
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.model.guards import GuardKind, precedence_slip, slipped
from loopcheck.model.syntax import int_value, source
from loopcheck.model.training import is_data_loop
from loopcheck.model.values import accumulation_gates_nothing
from loopcheck.model.windows import zeroed_every_micro_batch
from loopcheck.rules._base import Rule, Violation


class AccumulationBoundaryOffByOne(Rule):
    code = "LC106"
    message = "the accumulation step condition fires on the wrong micro-batch"

    VALID = [
        """
accelerator = Accelerator(gradient_accumulation_steps=4)
actor, critic, opt_actor, opt_critic, loader = accelerator.prepare(actor, critic, opt_actor, opt_critic, loader)
for batch in loader:
    with accelerator.accumulate(actor, critic):
        accelerator.backward(actor_loss(actor, batch) + critic_loss(critic, batch))
        opt_actor.step()
        opt_critic.step()
        opt_actor.zero_grad()
        opt_critic.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader, start=1):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if i % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
step = 0
for x, y in loader:
    step += 1
    loss = criterion(model(x), y) / accum
    loss.backward()
    if step % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
global_step = 0
if args.resume:
    global_step = checkpoint["global_step"]
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
n = 0
for x, y in loader:
    loss = criterion(model(x), y) / accum
    loss.backward()
    n += 1
    if n >= accum:
        optimizer.step()
        optimizer.zero_grad()
        n = 0
""",
        """
for step, (x, y) in enumerate(loader):
    step += 1  # 1-based from here on
    loss = criterion(model(x), y) / accum
    loss.backward()
    if step % accum == 0 or step == len(loader):
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (real, _) in enumerate(loader):
    if i % n_critic:
        d_loss = critic(generator(noise())).mean() - critic(real).mean()
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad()
    else:
        g_loss = -critic(generator(noise())).mean()
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad()
""",
    ]
    INVALID = [
        """
accelerator = Accelerator(gradient_accumulation_steps=4)
actor, critic, opt_actor, opt_critic, loader = accelerator.prepare(actor, critic, opt_actor, opt_critic, loader)
for batch in loader:
    with accelerator.accumulate(actor), accelerator.accumulate(critic):  # LC106
        accelerator.backward(actor_loss(actor, batch) + critic_loss(critic, batch))
        opt_actor.step()
        opt_critic.step()
        opt_actor.zero_grad()
        opt_critic.zero_grad()
""",
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        batches_done = len(loader) * epoch + i
        loss = criterion(model(x), y) / accum
        loss.backward()
        if batches_done % accum:  # LC106
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if i % accum == 0:  # LC106
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader, 1):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:  # LC106
        optimizer.step()
        optimizer.zero_grad()
""",
        """
start_step = 0
if args.resume:
    start_step = checkpoint["step"]
for step, (x, y) in enumerate(loader, start=start_step):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if step % accum == 0:  # LC106
        optimizer.step()
        optimizer.zero_grad()
""",
        """
n = 0
for x, y in loader:
    loss = criterion(model(x), y) / accum
    loss.backward()
    n += 1
    if n > accum:  # LC106
        optimizer.step()
        optimizer.zero_grad()
        n = 0
""",
        """
nb_tr_steps, global_step = 0, 0
for step in range(num_micro_batches):
    loss = criterion(*next(batches)) / accum
    nb_tr_steps += 1
    loss.backward()
    if (nb_tr_steps + 1) % accum == 0:  # LC106
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
        if global_step % eval_steps == 0:
            evaluate(model)
            nb_tr_steps = 0
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style is Style.ACCELERATE:
                yield from _accumulate_entered_twice(model, training)
                continue
            inverted = _inverted_boundary(training)
            if inverted is not None:
                yield inverted
                continue
            guard = training.step_guard
            if training.style is not Style.GUARDED or guard is None or guard.test is None:
                continue
            step = next(s for s in training.steps if training.guard(s).periodic)
            owner = next((c.owner for c in step.conds if c.test is guard.test), step.stmt)
            slip = slipped(guard.test)
            if slip is not None:  # wrong whatever N is, 1 included
                yield Violation(guard.test, owner, _precedence_message(slip, guard.flush))
                continue
            if accumulation_gates_nothing(training, model.index):
                continue  # N is 1 as shipped: every micro-batch steps, whichever one the test names
            if zeroed_every_micro_batch(training):
                continue  # every window is one micro-batch already (LC101): where the test fires changes nothing
            if guard.phase is Phase.LATE:
                yield Violation(guard.test, owner, f"`{source(guard.test)}` fires one micro-batch late for how "
                                                   f"`{guard.index}` is counted: every window sums N + 1 "
                                                   "micro-batches, not N")
                continue
            if _first_window_only(training):
                continue  # only the run's first window is short: every later one is N long
            after_backward = all(b.order < step.order for b in training.backwards)
            if guard.phase is Phase.OFF or guard.phase is Phase.START and after_backward:
                counted = guard.index
                # a count that runs on across epochs is off only where a zeroing at each epoch's start
                # opens a window (`_first_window_only` keeps the others out)
                if guard.restarts is True:
                    effect = "the first window is not N micro-batches long and every later step is shifted"
                elif guard.phase is Phase.START:
                    # the count runs on, so only an epoch that starts on a multiple of N steps on its first
                    # micro-batch; a window the zeroing shortens otherwise is LC105's
                    test = guard.test
                    remainder = test.left if type(test) is cst.Comparison else test
                    counter = counted = source(remainder.left) if type(remainder) is cst.BinaryOperation \
                        else guard.index
                    modulus = source(guard.modulus) if guard.modulus is not None else "N"
                    effect = (f"`{counter}` runs on across epochs, so where an epoch starts on a multiple of "
                              f"`{modulus}` (an epoch's batch count a multiple of it), the epoch-start zeroing leaves "
                              f"that epoch's first step one micro-batch of gradients, every epoch; "
                              f"`({counter} + 1) % {modulus} == 0` steps after a whole window")
                else:
                    effect = "the window that each epoch's zeroing opens is not N micro-batches long"
                yield Violation(guard.test, owner, f"`{source(guard.test)}` fires on the wrong micro-batch for how "
                                                   f"`{counted}` is counted: {effect}")


def _accumulate_entered_twice(model: FileModel, training: TrainingLoop) -> Iterator[Violation]:
    """``with accelerator.accumulate(actor), accelerator.accumulate(critic):`` (or two such ``with``
    blocks in a row) on every micro-batch: each entry counts one micro-batch toward
    ``gradient_accumulation_steps``, so with an even N the prepared optimizers step every N/2
    micro-batches, and in blocks one after the other the first block's never steps."""
    if accumulation_setting(model) is None or not isinstance(training.loop.node, (cst.For, cst.While)):
        return
    entries: dict[str, list[tuple[cst.With, cst.WithItem]]] = {}
    for stmt in training.loop.node.body.body:  # a block of the loop itself: every iteration enters it
        if type(stmt) is not cst.With:
            continue
        for item in stmt.items:
            call = item.item
            if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "accumulate":
                entries.setdefault(source(call.func.value), []).append((stmt, item))
    for accelerator, entered in entries.items():
        if len(entered) > 1:
            stmt, item = entered[1]
            models = ", ".join(source(a.value) for _, i in entered for a in i.item.args)  # type: ignore[attr-defined]
            # blocks one after the other: each block's step sees the count its own entry left
            in_a_row = len({id(w) for w, _ in entered}) > 1
            effect = (f"with N a multiple of {len(entered)}, the optimizers of the blocks before the last never "
                      f"step and the last block's steps every N/{len(entered)} micro-batches") if in_a_row else \
                f"with N a multiple of {len(entered)}, the optimizer steps every N/{len(entered)} micro-batches"
            yield Violation(item.item, stmt, f"`{accelerator}.accumulate()` is entered {len(entered)} times on every "
                                             "micro-batch, and each entry counts one toward the accumulation count: "
                                             f"{effect}; enter it once with every model, "
                                             f"`{accelerator}.accumulate({models})`")


def _inverted_boundary(training: TrainingLoop) -> Violation | None:
    """``if batches_done % N:`` around the step of a loop that back-propagates every micro-batch and
    zeroes only where it steps: the test holds on every micro-batch but each N-th, so the optimizer
    steps on N-1 of every N (windows of one and two micro-batches). With N = 2 and a 0-based counter
    that is every second micro-batch, as meant: not reported for a literal 2 (nor 1)."""
    steps = training.steps
    if training.style is not Style.UNKNOWN or not steps or not training.backwards:
        return None
    guards = [training.guard(s) for s in steps]
    if any(g.kind is not GuardKind.NOT_PERIODIC or g.partial or g.test is None or g.modulus is None for g in guards):
        return None
    if not all(training.guard(b).always for b in training.backwards) \
            or any(training.guard(z).always for z in training.events(Kind.ZERO_GRAD)):
        return None  # (zeroed on every micro-batch: each step sees one whichever the test picks, LC101)
    guard = guards[0]
    if int_value(guard.modulus) is not None and int_value(guard.modulus) <= 2:  # type: ignore[operator]
        return None
    owner = next((c.owner for c in steps[0].conds if c.test is guard.test), steps[0].stmt)
    remainder = guard.test.left if type(guard.test) is cst.Comparison else guard.test
    counter = source(remainder.left) if type(remainder) is cst.BinaryOperation else guard.index
    modulus = source(guard.modulus)  # type: ignore[arg-type]
    return Violation(guard.test, owner, f"`{source(guard.test)}` holds on every micro-batch but each N-th (N = "
                                        f"`{modulus}`): the optimizer steps on all the others, in windows of one "
                                        "and two micro-batches, not once every N (from N = 3 on); step when "
                                        f"`({counter} + 1) % {modulus} == 0`")


def _first_window_only(training: TrainingLoop) -> bool:
    """The counter starts once for the whole run: it runs on across epochs with nothing zeroing the
    gradients between them (``global_step``), or the loop is the run's only pass (``while step <
    total_steps:`` drawing its own batches). The shifted test then makes the run's first window one
    micro-batch short or long, and every later window N long: nothing a step sees is wrong after it."""
    guard = training.step_guard
    loop, parent = training.loop, training.loop.parent
    if guard is not None and guard.restarts is False:
        return parent is not None and parent.is_loop and not parent.events(Kind.ZERO_GRAD)
    return guard is not None and guard.restarts is True and type(loop.node) is cst.While and not is_data_loop(loop) \
        and not (parent is not None and parent.is_loop)


def _precedence_message(slip: cst.BinaryOperation, flush: bool | None) -> str:
    bound = precedence_slip(slip)
    assert bound is not None
    counter, literal, modulus = source(slip.left), source(bound.left), source(bound.right)
    op = "+" if isinstance(slip.operator, cst.Add) else "-"
    holds = f"on no micro-batch once `{modulus}` > 1 (on the first only where it is 1)" if (op, literal) == ("+", "1") \
        else "on the first micro-batch at most"
    steps = "only the last batch of each epoch steps, on the gradients summed since the previous step" if flush \
        else "the optimizer steps at most once"
    return (f"`{source(slip)}` is `{counter} {op} ({literal} % {modulus})`: `%` binds before `{op}`, so the test holds "
            f"{holds} and {steps}; write `({counter} {op} {literal}) % {modulus}`")
