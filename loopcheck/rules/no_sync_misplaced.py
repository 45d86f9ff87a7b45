"""## What it does
Checks for DDP's `no_sync()` / `require_backward_grad_sync` applied to the wrong micro-batches
of an accumulation window: the sync flag true on a micro-batch that is not the last (or set
after the forward pass it was meant for), a `no_sync() if cond else nullcontext()` whose
condition is inverted so that the last micro-batch runs un-synced, and `no_sync()` (or
Accelerate's `accelerator.no_sync(model)`) wrapping only `backward()` while the forward pass ran
outside it (itself, or in a function of the file that runs it, `loss = self._train_forward(batch)`,
`lp = self._log_prob(batch, self.model)`, also a method that a trainer and its base class both define
and both run the model in, as a gradient-cache trainer's `self.compute_loss(model, chunk)`; also a sync choice bound per micro-batch and entered later,
`sync_context = model.no_sync if not last else nullcontext` ... `with sync_context(): loss.backward()`
or `ctx = model.no_sync() if not do_step else contextlib.suppress()` ... `with ctx: loss.backward()`,
or a helper of the file that returns that choice, `with maybe_no_sync(model, do_step): loss.backward()`,
and a branch that runs the forward outside it where another branch runs it inside), or a trainer's own sync switch (a context manager
of the file that sets `require_backward_grad_sync` on its DDP modules or enters their
`no_sync()`) entered around the backward of a loss computed before it; and the forward run
before `with accelerator.accumulate(model):` is entered (accumulate() enters
`no_sync()` for the non-boundary micro-batches when `gradient_accumulation_steps` is set). The
Accelerate cases are not flagged where the project documents launches of the script (or of the
training scripts beside it) and every one runs a single process (`python train.py`, as LC501 reads
them): Accelerate then wraps nothing in DDP.

## Why is this bad?
DDP decides at forward time whether the next backward all-reduces. If the last micro-batch of
a window is un-synced, each rank steps with its own local gradients and the replicas silently
drift apart; the model that is saved is rank 0's. A `no_sync()` around backward alone has no
effect at all: every micro-batch still all-reduces. nanoGPT's
`model.require_backward_grad_sync = (micro_step == N - 1)` before the forward, and `no_sync()`
around the forward and backward (or the forward alone) of the non-last micro-batches, are
correct and not flagged; so is FSDP's `no_sync()` around the backward alone (FSDP reads it when
the gradients are reduced, after the backward).

## Fix
Sync exactly on the last micro-batch: `no_sync()` when *not* at the boundary, the flag
`micro_step == N - 1` set before the forward, and the forward inside the `no_sync()` block.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import Assignment, Cond, Event, FileModel, Kind, Style
from loopcheck.model.accelerate import accelerates_ddp, accumulation_setting
from loopcheck.model.distributed import (
    DISTRIBUTION_FLAG,
    DDP_WRAPPERS,
    FSDP_WRAPPERS,
    SYNC_CONTROLS,
    Micro,
    accelerator_no_sync,
    conditional_no_sync,
    forwards,
    in_no_sync,
    loss_sources,
    micro_from_guard,
    micro_of,
    no_sync_receiver,
    sync_manager,
    without_flag,
    wrap_calls,
)
from loopcheck.model.guards import Guard, GuardKind, exclusive
from loopcheck.model.index import Index
from loopcheck.model.syntax import dotted, last_part, names_in, own_call_name, positional, same, source, walk
from loopcheck.model.training import TrainingLoop
from loopcheck.rules._base import Rule, Violation


def _one_process(model: FileModel) -> bool:
    """Every documented launch of the script runs one process (``loopcheck.project.launches``):
    Accelerate then wraps nothing in DDP, and there is no sync to misplace."""
    return model.project is not None and model.project.single_process_launches


class NoSyncMisplaced(Rule):
    code = "LC502"
    message = "no_sync() / require_backward_grad_sync is applied to the wrong micro-batches"
    requires = ("no_sync", "_grad_sync", "accumulate(")

    VALID = [
        """
for micro_step in range(grad_accum):
    model.require_backward_grad_sync = micro_step == grad_accum - 1
    logits, loss = model(x, y)
    loss = loss / grad_accum
    loss.backward()
optimizer.step()
""",
        """
for i, (x, y) in enumerate(loader):
    last = (i + 1) % accum_steps == 0
    with model.no_sync() if not last else contextlib.nullcontext():
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    boundary = (i + 1) % accum_steps == 0
    if not boundary:
        with model.no_sync():
            out = model(x)
    else:
        out = model(x)
    loss = criterion(out, y) / accum_steps
    loss.backward()
    if boundary:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for batch in loader:
    chunks = split(batch, chunk_size)
    for chunk_no, chunk in enumerate(chunks):
        disable_sync = multi_gpu and chunk_no < len(chunks) - 1
        with ddp_model.no_sync() if disable_sync else contextlib.nullcontext():
            loss = ddp_model(chunk)
            loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
class Trainer:
    def _train_forward(self, batch):
        return self.model(batch).mean()

    def train(self, loader):
        for i, batch in enumerate(loader):
            last = (i + 1) % self.accum == 0
            with contextlib.nullcontext() if last else self.model.no_sync():
                loss = self._train_forward(batch)
                (loss / self.accum).backward()
            if last:
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
        """
class Brain:
    @contextmanager
    def no_sync(self, use=True):
        flags = [m.require_backward_grad_sync for m in self.modules.values()]
        for m in self.modules.values():
            m.require_backward_grad_sync = not use
        yield
        for m, flag in zip(self.modules.values(), flags):
            m.require_backward_grad_sync = flag

    def fit(self, loader):
        for i, batch in enumerate(loader):
            should_step = (i + 1) % self.accum == 0
            with self.no_sync(not should_step):
                loss = self.compute_objectives(self.compute_forward(batch), batch)
                (loss / self.accum).backward()
            if should_step:
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
        """
for step, batch in enumerate(loader):
    my_context = model.no_sync if rank != -1 and step % accum != 0 else contextlib.nullcontext
    with my_context():
        loss = criterion(model(batch)) / accum
        scaler.scale(loss).backward()
    if step % accum == 0 and step != 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
    ]

    INVALID = [
        """
from contextlib import nullcontext
model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    last = (i + 1) % accum_steps == 0
    sync_context = model.no_sync if not last else nullcontext
    out = model(x)
    loss = criterion(out, y) / accum_steps
    with sync_context():
        loss.backward()  # LC502
    if last:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    last = (i + 1) % accum_steps == 0
    with model.no_sync() if last else contextlib.nullcontext():  # LC502
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for step in range(max_steps):
    for micro_step in range(grad_accum):
        model.require_backward_grad_sync = micro_step == 0  # LC502
        loss = model(x, y) / grad_accum
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    out = model(x)
    loss = criterion(out, y) / accum_steps
    if (i + 1) % accum_steps != 0:
        with model.no_sync():
            loss.backward()  # LC502
    else:
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    model.require_backward_grad_sync = (i + 1) % accum_steps == 0  # LC502
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
class Trainer:
    def _train_forward(self, batch):
        return self.model(batch).mean()

    def train(self, loader):
        for i, batch in enumerate(loader):
            last = (i + 1) % self.accum == 0
            loss = self._train_forward(batch) / self.accum
            if not last:
                with self.model.no_sync():
                    loss.backward()  # LC502
            else:
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    outputs = model(**batch)
    with accelerator.accumulate(model):
        accelerator.backward(outputs.loss)  # LC502
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for step, batch in enumerate(loader):
    my_context = model.no_sync if rank != -1 and step % accum == 0 else contextlib.nullcontext  # LC502
    with my_context():
        loss = criterion(model(batch)) / accum
        loss.backward()
    if step % accum == 0 and step != 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    my_context = model.no_sync if i % accum_grad != 0 else contextlib.nullcontext  # LC502
    with my_context():
        loss = criterion(model(x), y) / accum_grad
        loss.backward()
    if (i + 1) % accum_grad == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for batch in loader:
    chunks = split(batch, chunk_size)
    for chunk_no, chunk in enumerate(chunks):
        skip_sync = multi_gpu and chunk_no < len(chunks) - 1
        gradient_sync = contextlib.nullcontext() if skip_sync else ddp_model.no_sync()  # LC502
        with gradient_sync:
            loss = ddp_model(chunk)
            loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
class Brain:
    @contextmanager
    def no_sync(self, use=True):
        flags = [m.require_backward_grad_sync for m in self.modules.values()]
        for m in self.modules.values():
            m.require_backward_grad_sync = not use
        yield
        for m, flag in zip(self.modules.values(), flags):
            m.require_backward_grad_sync = flag

    def fit(self, loader):
        for i, batch in enumerate(loader):
            should_step = (i + 1) % self.accum == 0
            loss = self.compute_objectives(self.compute_forward(batch), batch)
            with self.no_sync(not should_step):
                (loss / self.accum).backward()  # LC502
            if should_step:
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        accumulating = accumulation_setting(model) is not None
        for training in model.training_loops:
            yield from self._backward_only(training, model)
            if accumulating and training.style is Style.ACCELERATE and not _one_process(model):
                yield from self._forward_before_accumulate(training)
            if training.style in (Style.GUARDED, Style.MICRO_LOOP):
                yield from self._flags(training)
                yield from self._conditional_contexts(training)
                yield from self._branches(training)

    # -- no_sync() around backward while the forward ran outside ------------------------------
    def _backward_only(self, training: TrainingLoop, model: FileModel) -> Iterator[Violation]:
        index = model.index
        wrapped = [(b, c) for b in training.backwards for c in b.contexts if c.kind.startswith("no_sync")]
        if not wrapped or wrap_calls(model, FSDP_WRAPPERS) and not wrap_calls(model, DDP_WRAPPERS):
            return  # FSDP reads its no_sync() when the gradients are reduced, after the backward: it works there
        for backward, context in wrapped:
            if sync_manager(context.call, index):  # the trainer's own switch over its DDP modules
                if _forward_outside(training, backward, index):
                    yield self.at(backward, f"`{source(context.call)}` turns DDP's sync off only around the "
                                            "backward pass, but the forward this loss comes from ran before it: "
                                            "DDP decides at forward time, so this backward still all-reduces "
                                            "(the no_sync has no effect)")
                continue
            module = no_sync_receiver(context.call) or (conditional_no_sync(context.call) or (0, 0, None))[2]
            shown = f"{module}.no_sync()"
            if module is None and accelerates_ddp(model) and not _one_process(model):
                module = accelerator_no_sync(context.call, model.roles)
                shown = source(context.call)
            if module is None:
                continue
            found = forwards(training, module, backward, index)
            if found and not any(in_no_sync(f.contexts, module) for f in found):
                yield self.at(backward, f"`{shown}` wraps only the backward pass, but the forward "
                                        f"`{module}(...)` ran outside it: DDP decides at forward time, so this "
                                        "backward still all-reduces (no_sync has no effect)")
            elif (branch := _unsynced_branch_forward(training, backward, found, module)) is not None:
                where = f"`{source(branch.test)}` is false" if branch.negated else f"`{source(branch.test)}` holds"
                yield self.at(backward, f"`{shown}` wraps the backward pass, but where {where} the forward "
                                        f"`{module}(...)` runs outside it: DDP decides at forward time, so on that "
                                        "path this backward still all-reduces (no_sync has no effect)")

    # -- forward; with accelerator.accumulate(model): backward -------------------------------
    def _forward_before_accumulate(self, training: TrainingLoop) -> Iterator[Violation]:
        for backward in training.backwards:
            contexts = [c for c in backward.contexts if c.kind == "accumulate" and isinstance(c.call, cst.Call)]
            modules = [dotted(a) for c in contexts for a in positional(c.call)]  # type: ignore[arg-type]
            for module in filter(None, modules):
                outside = [f for f in forwards(training, module, backward)
                           if not any(c.kind in ("accumulate", "no_grad") for c in f.contexts)
                           and f in loss_sources(training, backward)]
                if outside:
                    yield self.at(backward, f"the forward `{module}(...)` runs before `accelerator.accumulate("
                                            f"{module})` is entered: DDP decides at forward time, so accumulate()'s "
                                            "no_sync has no effect and every micro-batch all-reduces")
                    return

    # -- require_backward_grad_sync = ... ------------------------------------------------------
    def _flags(self, training: TrainingLoop) -> Iterator[Violation]:
        flags = training.events(Kind.GRAD_SYNC_FLAG)
        for flag in flags:
            value = flag.value
            if value is None:
                continue
            literal = value.value if isinstance(value, cst.Name) and value.value in ("True", "False") else None
            if literal is None:
                always = training.reader.guard(flag.conds, flag.order).always
                if always and _unsynced_at_the_step(training, value, flag.order):
                    yield self.at(flag, f"`{flag.receiver}.require_backward_grad_sync` is false on exactly the "
                                        f"micro-batches the optimizer steps on (`{source(training.step_guard.test)}`): "
                                        "those are not all-reduced and the ranks step with different gradients")
                    continue
                micro = micro_of(value, training, flag.order) if always else None
                if micro is not None and not micro.includes_last and not _with_the_step(training, value, flag.order):
                    yield self.at(flag, f"`{flag.receiver}.require_backward_grad_sync` is true on {micro.value} of "
                                        "each window, so the last micro-batch is not all-reduced and the ranks "
                                        "step with different gradients")
                    continue
            elif literal == "False":
                micro = _branch_micro(flag.conds, training, flag.order)
                later_true = any(f.order > flag.order and isinstance(f.value, cst.Name) and f.value.value == "True"
                                 for f in flags)
                if micro is not None and micro.includes_last and not later_true:
                    yield self.at(flag, f"`{flag.receiver}.require_backward_grad_sync` is set to False on "
                                        f"{micro.value}: the last micro-batch of each window is not all-reduced")
                    continue
            yield from self._flag_after_forward(training, flag)

    def _flag_after_forward(self, training: TrainingLoop, flag: Event) -> Iterator[Violation]:
        module = flag.receiver
        backwards = [b for b in training.backwards if b.order > flag.order]
        if not module or not backwards:
            return
        found = forwards(training, module, backwards[0])
        if found and all(f.order < flag.order for f in found):
            yield self.at(flag, f"`{module}.require_backward_grad_sync` is set after the forward pass "
                                f"`{module}(...)`: DDP reads it at forward time, so each micro-batch runs with the "
                                "previous one's flag and the last micro-batch of a window is not all-reduced")

    # -- with model.no_sync() if cond else nullcontext() -------------------------------------
    def _conditional_contexts(self, training: TrainingLoop) -> Iterator[Violation]:
        candidates: dict[int, cst.BaseExpression] = {}
        sites: dict[int, cst.CSTNode] = {}  # a helper's choice -> the helper's call, where it is reported
        holders = [*training.loop.events(), *training.loop.assignments]
        for holder in holders:
            for context in holder.contexts:
                if context.kind == "no_sync?":
                    candidates[id(context.call)] = context.call
                    if context.site is not None:
                        sites[id(context.call)] = context.site
        for assignment in training.loop.assignments:
            if type(assignment.value) is cst.IfExp:  # exact types: isinstance() on libcst's ABCs is slow
                candidates[id(assignment.value)] = assignment.value
        for node in walk(training.loop.node):
            if type(node) is cst.With:
                for item in node.items:  # type: ignore[attr-defined]
                    if type(item.item) is cst.IfExp:
                        candidates[id(item.item)] = item.item
        for expr in candidates.values():
            parsed = conditional_no_sync(expr)
            if parsed is None:
                continue
            test, when_true, module = parsed
            micro = micro_of(test, training, None)
            if micro is None:
                continue
            unsynced = micro if when_true else micro.negated()
            on_step = _syncs_the_step(training, test, not when_true)
            if on_step or unsynced.includes_last and not _syncs_the_step(training, test, when_true):
                where = "the micro-batches the optimizer steps on" if on_step else f"{unsynced.value} of each window"
                site = sites.get(id(expr), expr)
                yield Violation(site, site, f"`{module}.no_sync()` applies on {where} "
                                            f"(`{source(sites.get(id(expr), test))}` is inverted): the last "
                                            "micro-batch is not "
                                            "all-reduced and the ranks step with different gradients")

    # -- if cond: with model.no_sync(): ... ---------------------------------------------------
    def _branches(self, training: TrainingLoop) -> Iterator[Violation]:
        for backward in training.backwards:
            modules = [no_sync_receiver(c.call) for c in backward.contexts if c.kind == "no_sync"]
            if not modules or modules[0] is None:
                continue
            micro = _branch_micro(backward.conds, training, backward.order)
            if micro is not None and micro.includes_last:
                yield self.at(backward, f"this backward runs under `{modules[0]}.no_sync()` on {micro.value} of "
                                        "each window: the last micro-batch is not all-reduced and the ranks "
                                        "step with different gradients")


def _unsynced_branch_forward(training: TrainingLoop, backward: Event, found: list[Assignment],
                               module: str) -> Cond | None:
    """The test choosing between two forwards of the loss on exclusive branches (``if args.model ==
    "bert": with sync_context(): out = model(x)`` / ``else: out = model(x)``), one under ``no_sync()``
    and one outside it on micro-batches before the last: the branch outside leaves the backward's
    ``no_sync()`` without effect. Only forwards the loss is computed from count."""
    synced = [f for f in found if in_no_sync(f.contexts, module)]
    if not synced:
        return None
    candidates = [(f, o) for f in found if f not in synced and _micro_of_conds(training, f) is not Micro.LAST
                  for o in synced if exclusive(f.conds, o.conds)]
    if not candidates:
        return None  # the unsynced forward of the last micro-batch is the sync it should have
    sources = loss_sources(training, backward)
    for forward, other in candidates:
        if forward in sources and other in sources:
            # the condition of this path that the synced one does not share (the `elif` test itself
            # where there is one)
            differing = [c for c in forward.conds if c.test is not None and not any(
                same(c.test, o.test) and c.negated == o.negated for o in other.conds if o.test is not None)]
            if differing and not any(_about_distribution(c.test) for c in differing):
                return next((c for c in differing if not c.negated), differing[0])
    return None


def _about_distribution(test: cst.BaseExpression) -> bool:
    """``if args.local_rank != -1:``, ``if args.distributed:``, ``if world_size > 1:``: a branch for a model
    that is not distributed (it has no sync to skip), not a way to train."""
    return any(DISTRIBUTION_FLAG.search(last_part(name)) for name in names_in(test))


def _micro_of_conds(training: TrainingLoop, assignment: Assignment) -> Micro | None:
    """On which micro-batches ``assignment`` runs, where its guard says so for certain."""
    guard = training.reader.guard(assignment.conds, assignment.order)
    return None if guard.always or guard.partial else micro_from_guard(guard)


def _forward_outside(training: TrainingLoop, backward: Event, index: Index) -> bool:
    """The loss ``backward`` back-propagates was computed before it in this iteration, by calls
    (``outputs = self.compute_forward(batch)``) none of which ran under a no_sync context or turns
    the sync off itself, with gradients on."""
    sources = loss_sources(training, backward, own=False)
    calls = [s for s in sources if any(isinstance(n, cst.Call) for n in walk(s.value))]
    return bool(calls) and not any(
        any(c.kind.startswith(("no_sync", "no_grad")) for c in s.contexts)
        or any(isinstance(n, cst.Call) and sync_manager(n, index) or _syncs_itself(n, index) for n in walk(s.value))
        for s in sources)


def _syncs_itself(node: cst.CSTNode, index: Index) -> bool:
    """A call of a function of the file that touches DDP's sync (``loss = self.forward_step(batch)``
    whose body enters ``no_sync()``)."""
    name = own_call_name(node) if isinstance(node, cst.Call) else None
    return name is not None and any(isinstance(n, cst.Attribute) and n.attr.value in SYNC_CONTROLS
                                    for fn in index.functions.get(name, []) for n in walk(fn))


def _with_the_step(training: TrainingLoop, value: cst.BaseExpression, order: int) -> bool:
    """The flag is the step's own periodic test (``itr % N == 0`` for both): it syncs the micro-batch
    the optimizer steps on, the last of each window as the loop really runs; a step on the wrong
    micro-batch is the off-by-one's finding, not a misplaced sync."""
    step = training.step_guard
    return step is not None and not step.partial and _the_steps(training.reader.atom(value, False, order, 0), step)


def _unsynced_at_the_step(training: TrainingLoop, value: cst.BaseExpression, order: int) -> bool:
    """The flag is the negation of the step's own periodic test (``i % N != 0`` against ``if i % N ==
    0:`` of OpenThaiGPT's trainer): it leaves unsynced exactly the micro-batches the optimizer steps on."""
    step = training.step_guard
    return step is not None and not step.partial and step.test is not None \
        and _the_steps(training.reader.atom(value, True, order, 0), step)


def _syncs_the_step(training: TrainingLoop, test: cst.BaseExpression, when_true: bool) -> bool:
    """The micro-batches ``test`` leaves synced (those where it is not ``when_true``) are those the
    optimizer steps on, by the step's own periodic test (``no_sync if i % N != 0`` with the step under
    ``i % N == 0 and i != 0``): the last of each window as the loop really runs, whatever the
    window's phase. With ``when_true`` negated: the ones it leaves unsynced are."""
    step = training.step_guard
    return step is not None and _the_steps(
        training.reader.atom(without_flag(test, training, None), when_true, None, 0), step)


def _the_steps(guard: Guard, step: Guard) -> bool:
    """``guard`` holds on the micro-batches the periodic ``step`` guard does."""
    return step.kind is GuardKind.PERIODIC and guard.kind is GuardKind.PERIODIC and guard.phase is step.phase \
        and guard.index == step.index and same(guard.modulus, step.modulus)


def _branch_micro(conds: tuple[Cond, ...], training: TrainingLoop, order: int) -> Micro | None:
    """The micro-batches on which an event under one ``if`` runs (``None``: unconditional or unsure)."""
    tests = [c for c in conds if c.test is not None]
    if len(tests) != 1 or len(conds) != 1:
        return None
    micro = micro_of(tests[0].test, training, order)  # type: ignore[arg-type]
    if micro is None:
        return None
    return micro.negated() if tests[0].negated else micro
