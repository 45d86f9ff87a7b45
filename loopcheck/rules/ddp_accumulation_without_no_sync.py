"""## What it does
Checks for gradient accumulation under `DistributedDataParallel` (the file wraps the model in
`DistributedDataParallel` / `DDP`, or another module of the project does: a helper such as
`smart_DDP(model)`, the entry script that imports the training loop, a file that gets DDP modules
from a project helper returning them (or from a project function returning what such a helper
returned: `get_model()` around `wrap_in_ddp()`) and hands them to the loop's class or function, a subclass of
another module that wraps the model for the base class's loop, or the base class of another module that wraps it
for the subclass's loop, where that module touches no sync) that never uses
`model.no_sync()` or `model.require_backward_grad_sync` (itself or through a helper), nor apex's
`model.disable_allreduce()`. In a file that touches the sync, a loop is checked only when none of
that code can reach it: the top-level class or function holding the loop touches no sync, names no
class or function that does, and is named by none (one trainer class's `no_sync()` does not cover another trainer of the file),
or when the loop enters `no_sync()` in one branch and back-propagates outside it in another, on
micro-batches before the last (one branch never vouches for the other; a branch for a model that is
not distributed, `if args.distributed:` ... `else:`, is not such a branch; only a loss that module
computed counts, and not one whose forward ran under its `no_sync()` on those micro-batches: DDP
decides at the forward, so an apex `scaled_loss.backward()` after it does not all-reduce). That check also runs where no wrap is in sight (`task.no_sync()` of a task wrapped
by another module): entering a module's `no_sync()` says it has a sync to skip. A wrapper imported under
another name (`DistributedDataParallel as NativeDDP`) is DDP, and so is a subclass named for it
(`MMDistributedDataParallel`, a project's `PyTorchDistributedDataParallel`). A trainer that rebinds
its model to a project helper's DDP wrapper through a module it was handed
(`self.model = self.adapter.model_to_ddp(self.model)`, the helper defined in another module) is
wrapped too. A step function (no loop of its own, called once per micro-batch) that steps every N
calls accumulates across them, also where it back-propagates through a helper of the file
(`backward_step(optimizer, model, loss, args)`, a helper that steps nothing). Where the file wraps
in torch's DDP on one side of a flag and in apex's on the other, the message names the wrap on the
side the accumulating loop runs (`if params.amp == -1:` torch's, `else:` apex's with accumulation).
A subclass of `transformers.Trainer` that copies the library's 3.x `train()` loop (DDP wrap
included) and calls the inherited `self.training_step(model, inputs)` back-propagates every
micro-batch there: no version of that method skips the all-reduce (the library's own 4.x loop runs
it under `model.no_sync()`, later under `accelerator.accumulate(model)`, and so does a copy of it).
A file that asserts the accumulation count is 1 under the flag it wraps under (`if args.distributed:
assert args.accumsteps == 1`) accumulates only where nothing is wrapped: not reported.
A file whose every `init_process_group` names `world_size=1` (a research script wrapping its model in
DDP for one GPU) runs one process: nothing is all-reduced, and nothing is reported.

## Why is this bad?
DDP all-reduces the gradients in every backward pass. Under accumulation only the last
micro-batch of a window needs it: the other N-1 all-reduces per optimizer step are pure
communication overhead, and on several nodes they can make accumulation slower than not
accumulating at all. The result is correct, only slow, hence a warning. A model prepared by
Accelerate (`accelerator.prepare(model)`, also in a list the file unpacks into it: `components =
[self.model, self.optimizer]`, `accelerator.prepare(*components)`) is a DDP module under a multi-process launch: manual
accumulation around `accelerator.backward(loss)` outside `accelerator.accumulate(model)` all-reduces
every micro-batch too; not where the project documents launches of the script (or, where it
launches none, of another training script of the same folder: `uv run train_mac.py` beside
`train_implicit_mlp_attn.py`) and every one runs a single process (`python train.py` in its shell scripts and READMEs, nothing about
`accelerate launch`, `torchrun`, several GPUs or processes anywhere in them: `loopcheck.project.launches`),
since Accelerate then wraps nothing. So does a model set up by Lightning Fabric (`fabric.setup(model, optimizer)`,
DDP on several devices under Fabric's default or a DDP strategy): `fabric.backward(loss)` accumulates
nothing itself, so a loop that steps every N micro-batches without `fabric.no_backward_sync(model,
enabled=is_accumulating)` all-reduces every one. Accelerate's `accumulate()`, FSDP and DeepSpeed engines
(also as Fabric strategies) handle the sync themselves and are not flagged.

Micro-steps that run under `with` contexts made by a function the project does not define, handed the
accelerator or the model (`for forward_context in model_forward_contexts(accelerator, model, N): with
forward_context(): ...`, pytorch-custom-utils' helper, which enters `accelerator.no_sync(model)` on all
but the last), are not flagged: whether they skip the sync cannot be read.

A loop whose losses come from the wrapped module itself (`self.model.module.train_step(batch)`)
and never from the wrapper's forward is not flagged: DDP reduces only a backward its own forward
prepared, so nothing is all-reduced at all there (the ranks never sync, which is another problem).
Nor is one whose losses all come from an object built around the model before the statement that
rebinds the model to its wrapper (`train_wrapper = TrainerWrapper(model)`, then `model, optim =
accelerator.prepare(model, optim)`): that object holds the unwrapped module.

## Fix
Run the forward and backward of every micro-batch but the last under `with model.no_sync():`,
or set `model.require_backward_grad_sync = (micro_step == N - 1)` before the forward (nanoGPT).
apex's `DistributedDataParallel` has no `no_sync()`: call `model.disable_allreduce()` before the
micro-batches that do not step and `model.enable_allreduce()` before the last.
With Accelerate, run each micro-batch under `with accelerator.accumulate(model):` (with
`Accelerator(gradient_accumulation_steps=N)`), or its forward and backward under
`accelerator.no_sync(model)` on all but the last micro-batch. With Fabric, run them under
`fabric.no_backward_sync(model, enabled=is_accumulating)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import Assignment, Event, FileModel, Framework, Role, Style, TrainingLoop
from loopcheck.model.fabric import ddp_setups
from loopcheck.model.index import Index
from loopcheck.model.accelerate import prepared_modules
from loopcheck.model.distributed import (
    DISTRIBUTION_FLAG,
    DDP_WRAPPERS,
    FSDP_WRAPPERS,
    SYNC_CONTROLS,
    SyncUnits,
    apex_wraps,
    base_ddp_wraps,
    helpers_control_sync,
    forward_helper,
    in_no_sync,
    imported_ddp_wraps,
    Micro,
    conditional_no_sync,
    loss_sources,
    micro_from_guard,
    no_sync_receiver,
    one_rank_group,
    sync_flags,
    wrap_calls,
)
from loopcheck.model.memory import trained_modules
from loopcheck.model.syntax import children, dotted, int_value, last_part, names_in, target_names, walk
from loopcheck.model.syntax import source as code_of
from loopcheck.model.training import is_fabric_backward
from loopcheck.model.values import accumulation_gates_nothing
from loopcheck.model.variants import dead_in
from loopcheck.patterns import Pattern
from loopcheck.rules._base import Rule, Violation


class DdpAccumulationWithoutNoSync(Rule):
    code = "LC501"
    message = "gradients are accumulated under DDP without no_sync(): every micro-batch all-reduces"

    VALID = [
        """
from torch.nn.parallel import DistributedDataParallel as DDP

def train(args, model, reader, optimizer):
    if args.distributed:
        assert args.accumsteps == 1  # accumulation is for one GPU only
        model = DDP(model, device_ids=[args.rank])
    for steps in reader:
        for queries, passages in steps:
            loss = criterion(model(queries, passages)) / args.accumsteps
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
""",
        """
MAX_GPU_BATCH_SIZE = 16
config = {"lr": 2e-5, "batch_size": 16}
batch_size = int(config["batch_size"])
gradient_accumulation_steps = 1
if batch_size > MAX_GPU_BATCH_SIZE:
    gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for step, batch in enumerate(loader):
    loss = model(**batch).loss / gradient_accumulation_steps
    accelerator.backward(loss)
    if (step + 1) % gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
if accelerator.state.deepspeed_plugin is not None:
    gradient_accumulation_steps = accelerator.state.deepspeed_plugin.deepspeed_config["gradient_accumulation_steps"]
else:
    gradient_accumulation_steps = 1
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for step, batch in enumerate(loader):
    loss = model(**batch).loss / gradient_accumulation_steps
    accelerator.backward(loss)
    if (step + 1) % gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
model = DDP(model, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    last = (i + 1) % accum_steps == 0
    ctx = contextlib.nullcontext() if last else model.no_sync()
    with ctx:
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(model, device_ids=[rank])
while True:
    for micro_step in range(grad_accum):
        model.require_backward_grad_sync = micro_step == grad_accum - 1
        loss = model(x, y) / grad_accum
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(model, device_ids=[rank])
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP


class ReconstructionTrainer:
    def __init__(self, model, rank):
        self.model = DDP(model, device_ids=[rank])

    def sync_unless_last(self, i):
        return contextlib.nullcontext() if i == self.grad_accum - 1 else self.model.no_sync()


class GenerativeTrainer(ReconstructionTrainer):
    def train_step(self):
        for i in range(self.grad_accum):
            with self.sync_unless_last(i):
                loss = self.model(next(self.batches)) / self.grad_accum
                loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
accelerator = Accelerator()
model = accelerator.prepare(torch.nn.Linear(2, 2))
optimizer = accelerator.prepare(torch.optim.AdamW(model.parameters()))
for step, batch in enumerate(loader):
    loss = model(batch).sum() / N
    accelerator.backward(loss)  # LC501
    if (step + 1) % N == 0 or step + 1 == len(loader):
        optimizer.step()
        optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP

def train(args, model, reader, optimizer):
    if args.distributed:
        model = DDP(model, device_ids=[args.rank])
    if args.fp16:
        assert args.accumsteps == 1  # only the fp16 runs give up accumulation
    for steps in reader:
        for queries, passages in steps:
            loss = criterion(model(queries, passages)) / args.accumsteps
            loss.backward()  # LC501
        optimizer.step()
        optimizer.zero_grad()
""",
        """
model = DistributedDataParallel(model, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()  # LC501
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(model, device_ids=[local_rank])
for step in range(max_steps):
    for micro in range(grad_accum):
        loss = model(*get_batch()) / grad_accum
        scaler.scale(loss).backward()  # LC501
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
""",
        """
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
for idx, (samples, targets) in enumerate(loader):
    loss = criterion(model(samples), targets) / accum_steps
    loss_scaler(loss, optimizer, parameters=model.parameters(),  # LC501
                update_grad=(idx + 1) % accum_steps == 0)
    if (idx + 1) % accum_steps == 0:
        optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(model, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    out = model(x)
    (criterion(out, y) / accum_steps).backward(retain_graph=True)  # LC501
    (aux_criterion(out) / accum_steps).backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
def train(self, loader, batch_per_epoch):
    model = nn.parallel.DistributedDataParallel(self.model, device_ids=[self.device])
    start_id = 0
    gradient_interval = min(batch_per_epoch - start_id, self.gradient_interval)
    for batch_id, batch in enumerate(islice(loader, batch_per_epoch)):
        loss = model(batch) / gradient_interval
        loss.backward()  # LC501
        if batch_id - start_id + 1 == gradient_interval:
            self.optimizer.step()
            self.optimizer.zero_grad()
            start_id = batch_id + 1
            gradient_interval = min(batch_per_epoch - start_id, self.gradient_interval)
""",
        """
accelerator = Accelerator()
model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
model.train()
for step, batch in enumerate(train_dataloader):
    loss = model(**batch).loss / gradient_accumulation_steps
    accelerator.backward(loss)  # LC501
    if (step + 1) % gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP


class ReconstructionTrainer:
    def __init__(self, model, rank):
        self.model = DDP(model, device_ids=[rank])

    def train_step(self):
        for i in range(self.grad_accum):
            last = i == self.grad_accum - 1
            with contextlib.nullcontext() if last else self.model.no_sync():
                loss = self.model(next(self.batches)) / self.grad_accum
                loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()


class SemanticTrainer:
    def __init__(self, model, rank):
        self.model = DDP(model, device_ids=[rank])

    def train_step(self):
        for i in range(self.grad_accum):
            loss = self.model(next(self.batches)) / self.grad_accum
            loss.backward()  # LC501
        self.optimizer.step()
        self.optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        # Loops that accumulate by hand (Accelerate's accumulate() and engines decide the sync
        # themselves), read first: most files have none, and the wrap lookups below read the whole
        # file and the project's other modules.
        accumulating = [t for t in model.training_loops if t.style in (Style.GUARDED, Style.MICRO_LOOP)
                        and not accumulation_gates_nothing(t, model.index)]
        if not accumulating:
            return
        if wrap_calls(model, FSDP_WRAPPERS) or helpers_control_sync(model):
            return
        if one_rank_group(model):
            return  # `init_process_group(..., world_size=1)`: DDP over one process all-reduces nothing
        ddp = wrap_calls(model, DDP_WRAPPERS)
        elsewhere = imported_ddp_wraps(model) if not ddp else []
        prepared = prepared_modules(model, trained_modules(model)) if not ddp and not elsewhere else []
        fabric = ddp_setups(model) if not ddp and not elsewhere and not prepared else []
        # a class whose base, in another module, wraps the model: only that class's loops
        based = base_ddp_wraps(model) if not ddp and not elsewhere else {}
        # no wrap in sight, but the file enters a module's `no_sync()` itself: such a module has a
        # sync to skip (wrapped where this file cannot see), and only the branch check applies
        unseen = not ddp and not elsewhere and not prepared and not based and not fabric
        if unseen and "no_sync" not in model.index.attributes:
            return
        done: set[int] = set()  # loops reported (in one of their variants)
        units: SyncUnits | None = None
        for training in accumulating:
            if id(training.loop.node) in done:
                continue
            by_base = based.get(_class_of(training.loop.function, model)) if based else None
            if not (unseen or elsewhere or by_base or any(not dead_in(c, training.loop.function, training.assumptions)
                                                for c in ddp or prepared or fabric)):
                continue  # the wrap is on the other branch of a flag this variant fixes
            # every micro-batch back-propagates (itself, or with a twin in the other branch of the
            # boundary test); engines own the sync
            backwards = [b for b in training.backwards if (b.framework in _OWN_SYNC or fabric and is_fabric_backward(b))
                         and training.every_iteration(b)]
            if not backwards or ddp and _wrapper_bypassed(model, training, ddp, backwards):
                continue
            if ddp and all(_overridden_where_wrapped(model, training, backwards, call) for call in ddp):
                continue  # each subclass that wraps the model runs its own version of the loop's methods
            if (ddp or prepared) and _forwards_built_before_the_wrap(model, training, ddp or prepared, backwards):
                continue  # the losses come from an object built around the unwrapped model: DDP never ran
            if ddp and _one_micro_batch_when_wrapped(model, training, backwards, ddp):
                continue  # `if args.distributed: assert args.accumsteps == 1`: no accumulation under DDP
            # a file that touches the sync itself: only loops its sync code cannot reach (the
            # units walk the whole file: read for the first loop that gets this far)
            unsynced = None
            if unseen:
                unsynced = _unsynced_branch(training, backwards, model.variants(training), model.index)
                if unsynced is None:
                    continue
            elif model.index.attributes & SYNC_CONTROLS:
                units = units or SyncUnits(model.module)
                if units.may_sync(training.loop.function):
                    # the sync is the loop's own business: only a branch of it that skips no_sync()
                    # where its twin enters it (one branch never vouches for the other)
                    unsynced = _unsynced_branch(training, backwards, model.variants(training), model.index)
                    if unsynced is None:
                        continue
            if _under_unread_contexts(model, training, backwards):
                continue  # `with forward_context():` from a library helper handed the accelerator or model
            # one finding per loop, however many losses it back-propagates, in however many variants
            done.add(id(training.loop.node))
            # at the loop's own call that back-propagates (a helper may serve several loops)
            node, stmt = backwards[0].site or (backwards[0].node, backwards[0].stmt)
            if unsynced is not None:
                node, stmt = unsynced.site or (unsynced.node, unsynced.stmt)
                yield Violation(node, stmt, f"gradients are accumulated ({training.style.value}) and another "
                                            "backward of this loop runs under `no_sync()`, but this one does not, on "
                                            "micro-batches before the last: each of them all-reduces, N-1 of N times "
                                            "for nothing")
                continue
            if ddp and (apex_wraps(model, ddp) or _apex_wrap_applies(model, training, ddp)):
                yield Violation(node, stmt, "the model is wrapped in apex's DistributedDataParallel and gradients are "
                                            f"accumulated ({training.style.value}), but its all-reduce is never "
                                            "switched off (apex's DDP has no `no_sync()`: `model.disable_allreduce()` "
                                            "before the micro-batches that do not step, `enable_allreduce()` before "
                                            "the last): every backward all-reduces, N-1 of N times for nothing")
            elif ddp or elsewhere or by_base:
                by = f" (by {elsewhere[0]})" if elsewhere else f" (by the base class, {by_base})" if by_base and not ddp \
                    else ""
                yield Violation(node, stmt, f"the model is wrapped in DistributedDataParallel{by} and gradients are "
                                            f"accumulated ({training.style.value}), but no micro-batch runs under "
                                            "`no_sync()`: every backward all-reduces, N-1 of N times for nothing")
            elif fabric:
                yield Violation(node, stmt, "the model is set up by Lightning Fabric (DistributedDataParallel on "
                                            f"several devices) and gradients are accumulated ({training.style.value}), "
                                            "but no micro-batch runs under `fabric.no_backward_sync(model)`: every "
                                            "backward all-reduces, N-1 of N times for nothing")
            elif model.project is None or not model.project.single_process_launches:
                # every documented launch of the script is `python script.py`: one process, no DDP
                yield Violation(node, stmt, "the model is prepared by Accelerate (DistributedDataParallel under a "
                                            f"multi-process launch) and gradients are accumulated by hand "
                                            f"({training.style.value}) outside `accelerator.accumulate()`: every "
                                            "backward all-reduces, N-1 of N times for nothing")


def _unsynced_branch(training: TrainingLoop, backwards: list[Event], variants: list[TrainingLoop],
                     index: Index) -> Event | None:
    """A backward of the loop that runs outside ``no_sync()`` on a micro-batch before the last, where
    another backward of the loop runs under it (``if distill: ...`` in one branch, ``else: with
    model.no_sync(): ...`` in the other): the loop controls the sync itself, and this branch does not.
    One branch never vouches for the other, but a variant whose flags turn the sync off (``if
    has_no_sync and not last:`` with ``has_no_sync`` false: not a DDP model) is not such a branch: the
    flags tested on the way to the ``no_sync()`` must hold as they do there. None where each backward
    either enters ``no_sync()`` or runs only on the last micro-batch (``else: loss.backward()`` of ``if
    not last: with model.no_sync():``), or where that is not certain, or where the loop sets the sync
    flag itself. Only a backward of a loss that the module of such a ``no_sync()`` computed in the
    iteration (itself or through a function of the file): another network's loss (a GAN's generator)
    is not that sync's business."""
    synced = []  # the flags (as assumed) on the way to each backward under no_sync()
    modules = set()  # the modules whose no_sync() those backwards run under
    for variant in variants:
        for backward in variant.backwards:
            entered = [_no_sync_module(c.call) for c in backward.contexts if c.kind.startswith("no_sync")]
            if entered:
                synced.append(_sync_flags_of(backward, variant.assumptions))
                modules.update(m for m in entered if m is not None)
    if not synced or sync_flags(training) or not any(
            all(training.assumptions.get(k) == v for k, v in flags.items()) for flags in synced):
        return None
    for backward in backwards:
        if any(c.kind.startswith("no_sync") for c in backward.contexts):
            continue
        if any(c.negated and c.test is not None and _MULTI_PROCESS_TEST.search(code_of(c.test)) for c in backward.conds):
            continue  # `if accelerator.distributed_type == DistributedType.MULTI_GPU: ... else:`: no DDP here
        if not any(_computed_by(source, module, index) for source in loss_sources(training, backward)
                   for module in modules):
            continue  # not a loss of that module (a GAN's other network), or not certainly one
        guard = training.guard(backward)
        micro = micro_from_guard(guard) if not guard.always and not guard.partial else None
        if (guard.always or micro is not None and micro is not Micro.LAST) \
                and not _forwards_synced(training, backward, modules, index):
            return backward
    return None


# A test that is true where the model is wrapped in DDP: its `else` runs unwrapped
_MULTI_PROCESS_TEST = Pattern(r"^[\w.]*distributed_type\s*==\s*[\w.]*MULTI_GPU$|^isinstance\([^,]+,\s*"
                              r"(?:[\w.]*\.)?(?:DistributedDataParallel|DDP)\)$")


def _one_micro_batch_when_wrapped(model: FileModel, training: TrainingLoop, backwards: list[Event],
                                  wraps: list[cst.Call]) -> bool:
    """The file asserts the loop's accumulation count is 1 under the flag it wraps the model under (``if
    args.distributed: assert args.accumsteps == 1`` beside ``if args.distributed: model = DDP(model)``):
    a run that wraps accumulates nothing."""
    asserted = set(_ASSERTED_ONE.findall(model.source))
    if not asserted:
        return False  # (no `assert <name> == 1` in the file: the walk below is for files that have one)
    counted = names_in(training.modulus) if training.modulus is not None else set()
    for backward in backwards:
        counted |= names_in(backward.loss) if backward.loss is not None else set()
    # (`loss = loss / args.accumsteps` in the loop: what the loss is divided by)
    counted |= {n for a in training.loop.assignments if set(a.names) & counted and a.value is not None
                for n in names_in(a.value)}
    if not counted & asserted:
        return False
    flags = _if_tests(model.module)
    wrapped = {flags.get(id(call), ()) for call in wraps}
    for node, tests in ((n, flags.get(id(n), ())) for n in walk(model.module, into_functions=True)):
        if type(node) is not cst.Assert or not tests or type(node.test) is not cst.Comparison \
                or len(node.test.comparisons) != 1:
            continue
        comparison = node.test.comparisons[0]
        bound = int_value(comparison.comparator)
        if dotted(node.test.left) in counted and (
                type(comparison.operator) in (cst.Equal, cst.LessThanEqual) and bound == 1
                or type(comparison.operator) is cst.LessThan and bound == 2) \
                and any(w and w[-1] in tests for w in wrapped):
            return True
    return False


_ASSERTED_ONE = Pattern(r"\bassert\s+([\w.]+)\s*(?:==\s*1|<=\s*1|<\s*2)\b")


def _if_tests(module: cst.Module) -> dict[int, tuple[str, ...]]:
    """Each assert and call of the module -> the source of the ``if`` tests around it (body side only)."""
    found: dict[int, tuple[str, ...]] = {}
    stack: list[tuple[cst.CSTNode, tuple[str, ...]]] = [(module, ())]
    while stack:
        node, tests = stack.pop()
        kind = type(node)
        if kind is cst.Assert or kind is cst.Call:
            found[id(node)] = tests
        if kind is cst.If:
            inner = (*tests, code_of(node.test))
            stack.append((node.body, inner))
            if node.orelse is not None:
                stack.append((node.orelse, tests))
            continue
        stack.extend((child, tests) for child in children(node))
    return found


def _forwards_synced(training: TrainingLoop, backward: Event, modules: set[str], index: Index) -> bool:
    """Every forward of those ``modules`` that the loss of ``backward`` comes from runs under its
    ``no_sync()`` or only on the last micro-batch of a window (``if step % N == 0: out = model(x)`` /
    ``else: with model.no_sync(): out = model(x)``): DDP decides at the forward, so the backward then
    all-reduces only where it should, whatever context it has itself."""
    for source in loss_sources(training, backward):
        if not any(_computed_by(source, module, index) for module in modules) \
                or any(in_no_sync(source.contexts, module) for module in modules):
            continue
        guard = training.reader.guard(source.conds, source.order)
        if guard.always or guard.partial or micro_from_guard(guard) is not Micro.LAST:
            return False
    return True


def _computed_by(assignment: Assignment, module: str, index: Index) -> bool:
    """``assignment`` calls the DDP ``module`` (``logits = model(x)``), or a function of the file that
    runs it (``loss = _forward()``)."""
    return any(isinstance(n, cst.Call) and (dotted(n.func) == module or forward_helper(n, module, index))
               for n in walk(assignment.value))


def _no_sync_module(context: cst.BaseExpression) -> str | None:
    """``model`` for ``model.no_sync()``, ``model.no_sync() if ... else nullcontext()``,
    ``accelerator.no_sync(model)`` or ``fabric.no_backward_sync(model, enabled=...)``."""
    found = no_sync_receiver(context) or (conditional_no_sync(context) or (None, None, None))[2]
    if found is None:
        call = context.body if isinstance(context, cst.IfExp) else context
        if isinstance(call, cst.Call) and call.args and not call.args[0].keyword:
            found = dotted(call.args[0].value)
    return found


def _sync_flags_of(backward: Event, assumptions: dict[str, bool]) -> dict[str, bool]:
    """The flags, as ``assumptions`` take them, that decide whether ``backward`` runs under its
    ``no_sync()``: those tested together with the boundary (``if has_no_sync and not need_update:``)
    and those about distribution (``if args.distributed:``, ``if world_size > 1:``). A flag that only
    picks a way to train (``if args.distill:``) does not."""
    found = {}
    for cond in backward.conds:
        names = names_in(cond.test) if cond.test is not None else set()
        mixed = any(n not in assumptions for n in names)
        found.update({n: assumptions[n] for n in names if n in assumptions and (mixed or DISTRIBUTION_FLAG.search(n))})
    return found




def _wrapper_bypassed(model: FileModel, training: TrainingLoop, wraps: list[cst.Call], backwards: list[Event]) -> bool:
    """A loss comes from the wrapped module itself (``self.model.module.train_step(batch)``, VL-T5) and
    the loop never runs the DDP wrapper's forward: DDP's reducer acts only on a backward its own
    forward prepared, so no micro-batch all-reduces (nor does the last one: the ranks never sync)."""
    if ".module" not in model.source:
        return False
    wrapped = {name for name, calls in model.roles.constructed.items() if any(c is w for c in calls for w in wraps)}
    full = {f for name in wrapped for f in model.roles.full_names.get(name, ())}
    values = [a.value for a in training.loop.assignments if a.op != "for"] + [b.loss for b in backwards]
    for node in (n for value in values if value is not None for n in walk(value)):
        if isinstance(node, cst.Call) and _runs_wrapper(node, wrapped, full, model):
            return False
    for backward in backwards:
        # a loss bound where no assignment is (`with amp.scale_loss(loss, opt) as scaled_loss:`): what came before
        sources = loss_sources(training, backward) or [a for a in training.loop.assignments
                                                       if a.order < backward.order and a.op != "for"]
        for source in sources:
            for node in walk(source.value):
                parts = (dotted(node.func) or "").split(".") if isinstance(node, cst.Call) else []
                if any(a in wrapped and b == "module" for a, b in zip(parts, parts[1:])):
                    return True
    return False


def _runs_wrapper(call: cst.Call, wrapped: set[str], full: set[str], model: FileModel) -> bool:
    """``ddp(x)``, ``ddp.forward(x)``, a call handed the wrapper (but a builtin that only looks at it,
    ``hasattr(model, "module")``), or a function of the file that calls it."""
    parts = (dotted(call.func) or "").split(".")
    return parts[-1] in wrapped or len(parts) > 1 and parts[-2] in wrapped and parts[-1] == "forward" \
        or parts != ["hasattr"] and parts != ["isinstance"] and any(
            last_part(dotted(a.value) or "") in wrapped for a in call.args) \
        or any(forward_helper(call, name, model.index) for name in full)


def _forwards_built_before_the_wrap(model: FileModel, training: TrainingLoop, wraps: list[cst.Call],
                                    backwards: list[Event]) -> bool:
    """Every loss comes from an object built around the model before the statement that rebinds the
    model to its wrapper (``train_wrapper = RecurrentTrainerWrapper(model)``, later ``model, optim =
    accelerator.prepare(model, optim)``), never from the rebound name itself: the object holds the
    unwrapped module, DDP's forward never runs, and no backward all-reduces (nor does the last one:
    the ranks never sync, which is another problem)."""
    scope = training.loop.function or model.module
    order: dict[int, int] = {}
    rebound: dict[str, int] = {}  # model names rebound to a wrapper -> where
    trained = trained_modules(model)  # not the optimizer or loaders `prepare` rebinds beside it
    handed = {d for w in wraps for a in w.args if (d := dotted(a.value))}  # a wrapper prepared itself runs DDP
    for at, node in enumerate(walk(scope)):  # one walk: each node's place, and the rebindings
        order[id(node)] = at
        # an exact type: libcst's classes are ABCs, and isinstance() on them is slow
        if type(node) is cst.Assign and any(node.value is w for w in wraps):
            args = {dotted(a.value) for a in node.value.args} - {None}
            for t in node.targets:
                rebound.update({n: at for n in target_names(t.target) if n in args and n in trained})
    if not rebound:
        return False
    for backward in backwards:
        sources = loss_sources(training, backward)
        if not sources or any(isinstance(n, (cst.Name, cst.Attribute)) and dotted(n) in rebound
                              for source in sources for n in walk(source.value)):
            return False  # the wrapped model runs (or is handed on) here
        if not any(_built_before(model, call, rebound, handed, order) for source in sources
                   for call in walk(source.value) if isinstance(call, cst.Call)):
            return False
    return True


def _built_before(model: FileModel, call: cst.Call, rebound: dict[str, int], handed: set[str],
                  order: dict[int, int]) -> bool:
    """``call`` runs an object built once, around a model name, before that name is rebound to the
    wrapper, and never handed to the wrapping itself."""
    name = dotted(call.func) or ""
    made = model.roles.constructed.get(name, [])
    if name in handed or len(made) != 1 or len(model.index.values.get(last_part(name), [])) > 1:
        return False
    where = order.get(id(made[0]))
    around = {dotted(a.value) for a in made[0].args}
    return where is not None and any(n in around and where < at for n, at in rebound.items())


def _under_unread_contexts(model: FileModel, training: TrainingLoop, backwards: list[Event]) -> bool:
    """Every backward runs under a ``with`` context that a function this project does not define made
    from the accelerator or the model (``for forward_context in model_forward_contexts(accelerator,
    model, N): with forward_context(): ...``, pytorch-custom-utils' helper that enters
    ``accelerator.no_sync(model)`` on all micro-steps but the last, or ``with helper(model, step):``):
    whether it skips the sync cannot be read here."""
    scope = training.loop.function or model.module
    withs: list[cst.With] = []
    fors: list[cst.For] = []
    for node in walk(scope):  # one walk: the `with` blocks, and the loops over a call's results
        kind = type(node)
        if kind is cst.With:
            withs.append(node)  # type: ignore[arg-type]
        elif kind is cst.For and type(node.iter) is cst.Call:  # type: ignore[attr-defined]
            fors.append(node)  # type: ignore[arg-type]
    if not withs:
        return False
    # for-targets bound to what such a helper yields
    makers = {n for f in fors if _unread_helper_of(model, f.iter) for n in names_in(f.target)}  # type: ignore[arg-type]
    covering = [node for node in withs if any(
        isinstance(item.item, cst.Call) and (isinstance(item.item.func, cst.Name) and item.item.func.value in makers
                                             or _unread_helper_of(model, item.item)) for item in node.items)]
    if not covering:
        return False
    inside = {id(n) for w in covering for n in walk(w.body)}
    return all(id((b.site or (b.node, b.stmt))[0]) in inside for b in backwards)


def _unread_helper_of(model: FileModel, call: cst.Call) -> bool:
    """``call`` runs an imported function that no module of the project defines, handed the
    accelerator or a module the file trains."""
    name = dotted(call.func)
    if name is None or "." in name or name in model.index.functions or not _imported(model, name):
        return False
    if model.project is not None and model.project.defines(call):
        return False
    trained = trained_modules(model)
    return any(model.roles.of(dotted(a.value)) is Role.ACCELERATOR or dotted(a.value) in trained
               or last_part(dotted(a.value) or "") in model.roles.prepared for a in call.args)


def _imported(model: FileModel, name: str) -> bool:
    """``name`` is bound by ``from module import name`` (or ``... as name``)."""
    for statement in model.index.imports:
        if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar):
            if any((alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                    else dotted(alias.name)) == name for alias in statement.names):
                return True
    return False


def _overridden_where_wrapped(model: FileModel, training: TrainingLoop, backwards: list[Event],
                              call: cst.Call) -> bool:
    """The wrap sits in a subclass (of this file) of the loop's class that defines the loop's method
    again, or every method the loop's backwards are in: the base's loop never runs on the wrapper
    (SpeeQ's ``BaseDistTrainer(BaseTrainer)`` wraps and has its own ``backward_pass``)."""
    base = _class_of(training.loop.function, model)
    classes = {stmt.name.value: stmt for stmt in model.module.body if type(stmt) is cst.ClassDef}
    wrapping = next((c for c in classes.values() if any(n is call for n in walk(c, into_functions=True))), None) \
        if base else None
    if wrapping is None or wrapping.name.value == base or base not in _bases_in_file(wrapping, classes):
        return False
    defined = {member.name.value for member in wrapping.body.body if type(member) is cst.FunctionDef}
    origins = {b.origin.name.value if b.origin is not None else None for b in backwards}
    return training.loop.function.name.value in defined or None not in origins and origins <= defined  # type: ignore[union-attr]


def _bases_in_file(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> set[str]:
    """The names of ``cls``'s bases, and of theirs where the file defines them."""
    found: set[str] = set()
    stack = [cls]
    while stack:
        for arg in stack.pop().bases:
            name = dotted(arg.value)
            if name is not None and name not in found:
                found.add(name)
                if name in classes:
                    stack.append(classes[name])
    return found


def _class_of(function: cst.FunctionDef | None, model: FileModel) -> str | None:
    """The top-level class whose method ``function`` is."""
    if function is None:
        return None
    for stmt in model.module.body:
        if isinstance(stmt, cst.ClassDef) and any(member is function for member in stmt.body.body):
            return stmt.name.value
    return None


# Backward passes whose gradient sync nobody but DDP decides (engines and accumulate() decide their own).
_OWN_SYNC = (Framework.TORCH, Framework.LOSS_SCALER, Framework.ACCELERATE)


def _apex_wrap_applies(model: FileModel, training: TrainingLoop, ddp: list[cst.Call]) -> bool:
    """The file wraps in torch's DDP on one branch of a flag and in apex's on the other, and the loop's
    variant fixes that flag to the apex side (``if params.amp == -1: ...DistributedDataParallel`` /
    ``if params.amp >= 0: apex.parallel.DistributedDataParallel``, accumulation only where amp is on)."""
    if not training.assumptions or not any(apex_wraps(model, [c]) for c in ddp):
        return False
    wanted = {id(c) for c in ddp}
    holders = {id(c): fn for fns in model.index.functions.values() for fn in fns for c in walk(fn.body)
               if id(c) in wanted}
    live = [c for c in ddp if not dead_in(c, holders.get(id(c)), training.assumptions)]
    return bool(live) and apex_wraps(model, live)

