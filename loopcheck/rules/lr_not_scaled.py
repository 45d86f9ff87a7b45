"""## What it does
Checks learning rates scaled by a batch size. By default: the file scales the LR by the batch
size (`lr = base_lr * batch_size / 256`) but leaves out a factor of the effective batch that the
file also uses: the gradient-accumulation count of its training loop, or the number of
data-parallel processes when it trains under DDP with a per-process batch size. With a reference
declared in `[tool.loopcheck.lr-scaling]` (`reference-batch-size`, `reference-lr`, `rule =
"linear"` or `"sqrt"`), it also checks a learning rate the file pins down (a literal, a single
assignment or an argparse default) against the rule for the effective batch (micro-batch x
accumulation x world size), where all three are visible; otherwise it says nothing. A learning
rate divided by the batch size (`LR / batch_size`, Darknet's normalisation of a loss summed over
the batch) follows no scaling rule and is left alone, and so is the number of processes where the
batch size is a parameter of the function that scales by it (a scheduler class handed `batch_size`):
whether the caller passes the per-process or the global batch, the file does not show. Horovod's
`hvd.size()` is the number of processes; a base LR scaled by the batch alone is not flagged where
the optimizer is handed it times the process count (`lr=args.base_lr * hvd.size()`).

## Why is this bad?
The linear scaling rule is about the batch one optimizer step sees. (Where every accumulating loop of
the file back-propagates its loss undivided, each step sums N micro-batch gradients, and a rate scaled
by the micro-batch alone is the rule for the window: not flagged.) With accumulation N and W
processes that is `batch_size * N * W`; scaling by the per-process micro-batch alone gives a
learning rate N*W times too small: the run converges slowly or not at all, and looks "stable".

## Fix
Scale by the effective batch: `lr = base_lr * batch_size * accum_steps * world_size / 256`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel
from loopcheck.model.loss import Scaling, loss_scaling
from loopcheck.model.syntax import children, func_name, keyword, last_part, names_in, source, walk
from loopcheck.model.values import BATCH_SIZE_NAME, LR_NAME, numeric, optimizer_lr_expressions, optimizer_lrs
from loopcheck.patterns import Pattern
from loopcheck.rules._base import Rule, Violation

_ACCUM = Pattern(r"accum|gradient_accumulation|grad_acc|update_freq", re.I)
_WORLD = Pattern(r"world_size|get_world_size|global_size|num_replicas|num_processes|num_tasks|nprocs|n_gpu|num_gpus"
                 r"|ngpus", re.I)
_DATA_PARALLEL = ("DistributedDataParallel", "DistributedSampler", "init_process_group")


class LrNotScaled(Rule):
    code = "LC304"
    message = "the learning rate is scaled by a batch size that leaves out part of the effective batch"

    VALID = [
        """
eff_batch_size = args.batch_size * args.accum_iter * misc.get_world_size()
args.lr = args.blr * eff_batch_size / 256
for it, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / args.accum_iter
    loss.backward()
    if (it + 1) % args.accum_iter == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
lr = args.base_lr * args.batch_size / 256
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
init_lr = args.lr * args.batch_size / 256  # the global batch: divided per GPU below
if args.distributed:
    args.batch_size = int(args.batch_size / args.world_size)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
optimizer = torch.optim.SGD(model.parameters(), init_lr, momentum=0.9)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
def scale_lr(learning_rates, batch_size):
    return learning_rates * (batch_size * distributed.get_global_size()) / 256.0

model = torch.nn.parallel.DistributedDataParallel(model)
lr = scale_lr(args.lr, args.batch_size)
optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    ]
    INVALID = [
        """
lr = args.base_lr * args.batch_size / 256  # LC304
optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / args.accum_steps
    loss.backward()
    if (i + 1) % args.accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        accumulation = _accumulation_names(model)
        data_parallel = any(word in model.source for word in _DATA_PARALLEL)
        sizes: frozenset[str] = frozenset()
        if "horovod" in model.source:
            from loopcheck.model.horovod import horovod_size_names

            sizes = horovod_size_names(model.index.imports)

        def world(names: set[str]) -> bool:
            return any(_WORLD.search(last_part(n)) or n in sizes for n in names)

        rates = [(name, value, _factors(value, model)) for name, value in _learning_rates(model)]

        def scaled_later(name: str) -> bool:
            """A base LR the optimizer is handed times the process count (`lr=args.base_lr * hvd.size()`):
            scaled by it where it is used."""
            return any(world(used) and name in {last_part(n) for n in used} for _, _, used in rates)

        for name, value, used in rates:
            if not any(BATCH_SIZE_NAME.search(last_part(n)) for n in used) or not _scales(value):
                continue
            if True not in _batch_sides(value, model):
                continue  # `LR / batch_size`: a summed loss normalised through the LR, not the scaling rule
            missing = []
            # N by its own name too: Darknet's `lr = LR / batch_size / subdivision`
            counts = {last_part(n) for n in accumulation}
            if accumulation and not any(_ACCUM.search(last_part(n)) or last_part(n) in counts for n in used) \
                    and not _windows_summed(model):
                missing.append(f"the accumulation count `{sorted(accumulation)[0]}`")
            if data_parallel and not world(used) and not scaled_later(name) and not _global_batch(model) \
                    and not _batch_from_caller(value, used, model):
                missing.append("the number of processes")
            if missing:
                yield Violation(value, value, f"`{name}` is scaled by the per-step micro-batch but not by "
                                              f"{' and '.join(missing)}: the effective batch is larger than the "
                                              "learning rate assumes")
        yield from self._against_reference(model, accumulation, data_parallel)

    def _against_reference(self, model: FileModel, accumulation: set[str],
                           data_parallel: bool) -> Iterator[Violation]:
        reference = model.options.lr_scaling
        if reference is None or data_parallel or len(accumulation) > 1:
            return  # the world size is not visible in the file: nothing certain to compare
        accum = 1.0
        if accumulation:
            found = numeric(cst.parse_expression(next(iter(accumulation))), model.index)
            if found is None:
                return
            accum = found
        batch = _visible_batch_size(model)
        if batch is None:
            return
        for lr_node, lr in optimizer_lrs(model.index):
            expected = reference.expected_lr(batch * accum)
            if abs(lr - expected) > 0.1 * expected:
                yield Violation(lr_node, lr_node, f"the learning rate {lr:g} does not follow the {reference.rule} "
                                                  f"scaling rule for an effective batch of {batch * accum:g} "
                                                  f"({reference.reference_lr:g} at {reference.reference_batch_size}): "
                                                  f"expected about {expected:.3g}")


def _windows_summed(model: FileModel) -> bool:
    """Every loop of the file that accumulates back-propagates its loss undivided: each step sums N
    micro-batch gradients, so a rate scaled by the micro-batch alone is the linear-scaling rule for the
    window (Detectron.pytorch's ``iter_size``, on purpose)."""
    loops = [t for t in model.training_loops if t.accumulates and t.backwards]
    for training in loops:
        counts = {last_part(n) for n in names_in(training.modulus)} if training.modulus is not None else set()
        if any(b.loss is None or b.loop is None or loss_scaling(b.loss, b.loop, b.order, model.index.functions,
                                                                counts) is not Scaling.RAW
               for b in training.backwards):
            return False
    return bool(loops)


def _learning_rates(model: FileModel) -> Iterator[tuple[str, cst.BaseExpression]]:
    """Each learning rate the file computes once: ``lr = ...`` (through a helper of the file that
    returns it), and ``lr=`` written straight into an optimizer's constructor."""
    for name, values in model.index.values.items():
        if LR_NAME.search(name) and len(values) == 1:
            yield name, _returned(values[0], model)
    for lr, _ in optimizer_lr_expressions(model.index):
        if not isinstance(lr, (cst.Name, cst.Attribute)):
            yield "lr", _returned(lr, model)


# Calls whose arguments are the numbers they compute with; any other call's arguments (a
# DataLoader's batch_size=, the loader in len(loader)) are not factors of the LR
_NUMERIC = frozenset({"int", "float", "round", "sqrt", "min", "max", "abs", "pow", "ceil", "floor"})
_MAX_DEPTH = 4


def _factors(expr: cst.BaseExpression, model: FileModel, depth: int = 0) -> set[str]:
    """The names ``expr`` computes with, following names the file assigns exactly once: a burn-in
    ``lr = opt.lr * (i / burnin) ** 4`` with ``burnin = min(1000, len(dataloader))`` does not scale
    by the ``batch_size=`` that built ``dataloader``."""
    found: set[str] = set()
    for name in _operands(expr):
        found.add(name)
        values = model.index.values.get(last_part(name), [])
        if depth < _MAX_DEPTH and len(values) == 1:
            found |= _factors(values[0], model, depth + 1)
    return found


def _batch_sides(expr: cst.BaseExpression, model: FileModel, inverted: bool = False, depth: int = 0) -> set[bool]:
    """Where the batch sizes ``expr`` computes with stand (through the names ``_factors`` follows):
    True for a numerator, False for a divisor (``LR / batch_size``)."""
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.FloorDivide):
            # `epoch_size // micro_batch_size` counts batches (a warmup length in iterations): its
            # divisor is no factor of the LR
            return _batch_sides(expr.left, model, inverted, depth)
        right = not inverted if isinstance(expr.operator, cst.Divide) else inverted
        return _batch_sides(expr.left, model, inverted, depth) | _batch_sides(expr.right, model, right, depth)
    if isinstance(expr, cst.Call) and last_part(func_name(expr) or "") in _NUMERIC:
        return {side for arg in expr.args for side in _batch_sides(arg.value, model, inverted, depth)}
    sides = set()
    for name in _operands(expr):
        if BATCH_SIZE_NAME.search(last_part(name)):
            sides.add(not inverted)
        values = model.index.values.get(last_part(name), [])
        if depth < _MAX_DEPTH and len(values) == 1:
            sides |= _batch_sides(values[0], model, inverted, depth + 1)
    return sides


def _operands(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Call):
        name = func_name(node) or ""
        if last_part(name) in _NUMERIC:
            return {n for arg in node.args for n in _operands(arg.value)}
        return {name} if name else set()  # `misc.get_world_size()` counts by its name
    if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
        return names_in(node)
    found: set[str] = set()
    for child in children(node):
        found |= _operands(child)
    return found


def _returned(value: cst.BaseExpression, model: FileModel) -> cst.BaseExpression:
    """``scaled_lr(args)`` -> the expression ``scaled_lr`` returns, when the file defines it once with
    one ``return``."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return value
    defs = model.index.functions.get(value.func.value, [])
    returns = [n for n in walk(defs[0]) if isinstance(n, cst.Return)] if len(defs) == 1 else []
    return returns[0].value if len(returns) == 1 and returns[0].value is not None else value


def _scales(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Multiply, cst.Divide))


def _accumulation_names(model: FileModel) -> set[str]:
    """Names of N in the file's accumulating training loops."""
    return {source(t.modulus) for t in model.training_loops if t.accumulates and t.modulus is not None}


def _global_batch(model: FileModel) -> bool:
    """``batch_size // world_size`` somewhere (also ``int(args.batch_size / args.world_size)``): the
    configured batch is the global one, whether the LR is computed before or after the division."""
    for values in model.index.values.values():
        for value in values:
            for node in walk(value):
                if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.FloorDivide, cst.Divide)):
                    names = {last_part(n) for n in names_in(node)}
                    if any(BATCH_SIZE_NAME.search(n) for n in names) and any(_WORLD.search(n) for n in names):
                        return True
    return False


def _batch_from_caller(value: cst.BaseExpression, used: set[str], model: FileModel) -> bool:
    """Every batch size ``value`` scales by is a parameter of the function computing it (``def
    __init__(self, base_lr_per_img, batch_size)``): whether the caller hands it the per-process
    batch or the global one that a data loader of another module splits over the processes, this
    file does not show."""
    # (a reference size the file fixes, `MIN_BATCH_SIZE = 8` of `lr * batch_size / MIN_BATCH_SIZE`, is
    # no batch handed in)
    batches = {n for n in used if BATCH_SIZE_NAME.search(last_part(n)) and not _literal_constant(n, model)}
    if not batches or any("." in n for n in batches):
        return False
    for defs in model.index.functions.values():
        for fn in defs:
            if any(node is value for node in walk(fn.body)):
                params = fn.params
                names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
                return batches <= names
    return False


def _literal_constant(name: str, model: FileModel) -> bool:
    """The file binds ``name`` to numbers only (``MIN_BATCH_SIZE = 8``)."""
    values = model.index.values.get(name, [])
    return bool(values) and all(isinstance(v, (cst.Integer, cst.Float)) for v in values)


def _visible_batch_size(model: FileModel) -> float | None:
    sizes = set()
    for call in model.index.calls:
        size = keyword(call, "batch_size")
        if size is not None and (number := numeric(size, model.index)) is not None:
            sizes.add(number)
    return sizes.pop() if len(sizes) == 1 else None
