"""## What it does
Checks for a file that builds a model with `nn.BatchNorm*` layers and wraps it in
`DistributedDataParallel` or `DataParallel` without ever converting it with
`nn.SyncBatchNorm.convert_sync_batchnorm` (or building `nn.SyncBatchNorm` itself).
A file whose every `init_process_group` names `world_size=1` runs one process, whose BatchNorm sees the
whole batch: not reported; nor is a file that freezes every BatchNorm layer in eval mode (`for m in
net.modules(): if isinstance(m, nn.BatchNorm2d): m.eval()`) and never switches a module back to train
mode (or does so through a `train` override that freezes them again): those layers use their running
statistics, never a batch's. A wrap of a module the file never trains and puts in eval mode, where it
trains another (an extractor wrapped for a retrieval pass), is not reported either.

Opt-in in `loopcheck check` (`--extend-select LC503`); on by default in `loopcheck run`, which sees the
per-GPU batch. Whether a per-GPU batch is small is a configuration value, a caller's argument or a
launch script's: the file rarely shows it. In the outside reviews of code nobody on the project had read
(`benchmarks/results/fresh-precision-s28a.md`, `-s28b.md`, `-s29b.md`, `precision-s15.md`,
`precision-s18.md`), none of its findings was true (a book's `DataParallel` helper used at 64-128 images per
GPU, BatchNorms frozen in eval mode, an eval-only extractor), and the labelled real-world benchmark marks
each of its six loops debatable.

## Why is this bad?
Under data parallelism every GPU normalises with the mean and variance of its own slice of the
batch. With the small per-GPU batches that made data parallelism necessary (detection,
segmentation, large images) these statistics are noisy, training is less stable and the
running statistics used at evaluation differ from what a single-GPU run would learn. Whether the
per-GPU batch is small is often not visible in the source (a config value), so this is a warning
and its message says so; a batch size the file sets only for a run that does not train (the
`else:` of `if training:`) is not read as the training batch; a model whose BatchNorm layers are
defined in another file is not flagged.

## Fix
Convert before wrapping: `model = nn.SyncBatchNorm.convert_sync_batchnorm(model)`, then
`DDP(model, ...)` (SyncBatchNorm needs DDP, not `DataParallel`). If the per-GPU batch is large,
suppress the finding.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Loop
from loopcheck.model.distributed import DDP_WRAPPERS, DP_WRAPPERS, one_rank_group, wrap_calls
from loopcheck.model.memory import module_name, trained_modules
from loopcheck.model.syntax import (dotted, func_name, int_value, keyword, last_part, lines, method, names_in,
                                    positional, receiver, walk)
from loopcheck.patterns import Pattern
from loopcheck.rules._base import Rule, Violation

_BATCHNORM = Pattern(r"^BatchNorm([123]d)?$")
_BATCH_NAMES = ("batch_size", "per_device_train_batch_size", "train_batch_size", "batch_size_per_gpu")
LARGE_BATCH = 32


class BatchnormWithoutSync(Rule):
    code = "LC503"
    message = "a model with BatchNorm is wrapped for data parallelism without SyncBatchNorm"
    requires_all = ("BatchNorm", "DataParallel")  # and a training loop (the default `requires`)

    VALID = [
        """
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
model = DDP(net.cuda(rank), device_ids=[rank])
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.GroupNorm(8, 64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
model = DDP(net.cuda(rank), device_ids=[rank])
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
parser.add_argument("--batch_size", type=int, default=512, help="per GPU")
args = parser.parse_args()
model.head = nn.Sequential(nn.BatchNorm1d(768, affine=False), model.head)
model = DDP(model, device_ids=[args.gpu])
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
def test_unwrap_data_parallel():
    net = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4))
    wrapped = torch.nn.DataParallel(net)
    assert unwrap(wrapped) is net

def test_training_runs(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
for m in net.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.eval()  # frozen: running statistics only, in every process alike
model = DDP(net.cuda(rank), device_ids=[rank])
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    criterion(net(x), y).backward()
    optimizer.step()
extractor = nn.DataParallel(build_extractor().cuda(), device_ids=[0, 1])  # only runs, never trained
extractor.eval()
""",
    ]
    INVALID = [
        """
from torch.nn.parallel import DistributedDataParallel as DDP
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
model = DDP(net.cuda(rank), device_ids=[rank])  # LC503
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.bn = nn.BatchNorm2d(16)

model = torch.nn.DataParallel(Net()).cuda()  # LC503
loader = DataLoader(dataset, batch_size=8, shuffle=True)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP
net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
for m in net.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.eval()
model = DDP(net.cuda(rank), device_ids=[rank])  # LC503
for epoch in range(epochs):
    model.train()  # every layer back in train mode, the BatchNorm ones too
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if "SyncBatchNorm" in model.source or "convert_syncbn" in model.source \
                or "DataParallelWithCallback" in model.source:  # (Synchronized-BatchNorm-PyTorch's, in a branch)
            return
        layers = [c for c in model.index.calls if _is_batchnorm(c.func)]
        layers += [a.value for c in model.index.calls for a in c.args
                   if a.keyword is not None and _is_batchnorm(a.value)]  # norm_layer=nn.BatchNorm2d
        if not layers or not model.training_loops:
            return  # no BatchNorm built here, or nothing trained here (a test that only wraps)
        if one_rank_group(model):
            return  # `init_process_group(..., world_size=1)`: one process sees the whole batch
        if _batchnorm_frozen(model):
            return  # every BatchNorm normalises with its running statistics: no batch's are used
        batch = _visible_batch_size(model)
        if batch is not None and batch >= LARGE_BATCH:
            return  # per-GPU statistics over 32+ samples are fine (MAE's linear probe: 512 per GPU)
        tests = {id(n) for fns in model.index.functions.values() for fn in fns if fn.name.value.startswith("test")
                 for n in walk(fn, into_functions=True)}
        trained = trained_modules(model)
        for call in wrap_calls(model, DDP_WRAPPERS | DP_WRAPPERS):
            if id(call) in tests:
                continue  # a test that wraps a toy model to check the wrapper, not to train it
            if trained and _never_trained(model, call, trained):
                continue  # a model wrapped only to run it (an embedding extractor in eval mode)
            wrapper = last_part(func_name(call) or "")
            # the batch is often a config value: then say what depends on it rather than that it is small
            size = f"its own small batch's statistics ({batch} samples, as this file states it)" if batch is not None \
                else ("its own batch's statistics, noisy where the per-GPU batch is small (this file does not state "
                      "its size)")
            yield Violation(call, call, f"this file builds BatchNorm layers and wraps the model in `{wrapper}` "
                                        f"without `nn.SyncBatchNorm.convert_sync_batchnorm`: every GPU normalises "
                                        f"with {size}")


def _never_trained(model: FileModel, call: cst.Call, trained: set[str]) -> bool:
    """Neither the module the call wraps nor the name it is bound to is one the file trains, where the
    file trains others, and the file puts it in eval mode (``m = nn.DataParallel(m); m.eval()`` for a
    retrieval pass, beside the model the optimizer is built over): a module left in train mode still
    normalises with batch statistics, trained or not."""
    evaluated = {module_name(name) for c in model.index.calls
                 if (called := method(c)) is not None and called[1] == "eval" and (name := dotted(called[0]))}
    if not evaluated:
        return False
    args = positional(call)
    wrapped = receiver(args[0]) if args else None  # (`model.cuda()`: `module_name` strips the move)
    bound = {dotted(t.target) for node in walk(model.module, into_functions=True) if type(node) is cst.Assign
             and node.value is call for t in node.targets}
    names = {module_name(n) for n in (wrapped, *bound) if n is not None}
    return bool(names & evaluated) and not names & trained


def _batchnorm_frozen(model: FileModel) -> bool:
    """The file puts every BatchNorm layer in eval mode (``for m in encoder.modules(): if isinstance(m,
    nn.BatchNorm2d): m.eval()``) and never switches a module back to train mode, or does so in a
    ``train`` override that freezes them again: the layers never normalise with batch statistics."""
    if ".modules()" not in model.source:
        return False
    freezes = [node for node in walk(model.module, into_functions=True)
               if type(node) is cst.For and _freezes_batchnorm(node)]
    if not freezes:
        return False
    frozen = {id(f) for f in freezes}
    if any(fn.name.value == "train" and any(id(n) in frozen for n in walk(fn))
           for fns in model.index.functions.values() for fn in fns):
        return True  # `def train(self, mode=True): super().train(mode); <freeze>`: every switch re-freezes
    return not any((called := method(c)) is not None and called[1] == "train"
                   and not (c.args and c.args[0].keyword is None and dotted(c.args[0].value) == "False")
                   for c in model.index.calls)


def _freezes_batchnorm(loop: cst.For) -> bool:
    """``for m in net.modules(): if isinstance(m, BatchNorm...): m.eval()``."""
    called = method(loop.iter) if type(loop.iter) is cst.Call else None
    if called is None or called[1] != "modules" or type(loop.target) is not cst.Name:
        return False
    var = loop.target.value
    for node in walk(loop.body):
        if type(node) is cst.If and _tests_batchnorm(node.test, var):
            return any(type(n) is cst.Call and (m := method(n)) is not None and dotted(m[0]) == var
                       and (m[1] == "eval" or m[1] == "train" and n.args and dotted(n.args[0].value) == "False")
                       for n in walk(node.body))
    return False


def _tests_batchnorm(test: cst.BaseExpression, var: str) -> bool:
    """``isinstance(m, nn.BatchNorm2d)``, alone or joined by ``or`` (a tuple of classes too)."""
    if type(test) is cst.BooleanOperation:
        return _tests_batchnorm(test.left, var) and _tests_batchnorm(test.right, var)
    if type(test) is not cst.Call or dotted(test.func) != "isinstance" or len(test.args) != 2 \
            or dotted(test.args[0].value) != var:
        return False
    kinds = test.args[1].value
    classes = [e.value for e in kinds.elements] if type(kinds) is cst.Tuple else [kinds]
    return all(_is_batchnorm(c) or dotted(c) == "_BatchNorm" or (dotted(c) or "").endswith("._BatchNorm")
               for c in classes)


def _is_batchnorm(expr: cst.BaseExpression) -> bool:
    name = dotted(expr)
    return name is not None and bool(_BATCHNORM.match(last_part(name)))


def _visible_batch_size(model: FileModel) -> int | None:
    """The smallest batch size the file states as a literal (``batch_size = 8``, an argparse
    ``--batch-size`` default, ``DataLoader(..., batch_size=64)``); ``None`` when it states none. A
    value the file sets only for a run that does not train (the ``else`` of ``if training:``) is
    not the batch the GPUs normalise over while training."""
    found: list[int] = []
    evaluating = _evaluation_values(model)
    for name in _BATCH_NAMES:
        values = [int_value(v) for v in model.index.values.get(name, []) if id(v) not in evaluating]
        found += [v for v in values if v is not None]
    for call in model.index.calls:
        called = method(call)
        if called is not None and called[1] == "add_argument":
            flags = [a.value.strip("'\"").lstrip("-").replace("-", "_") for a in positional(call)
                     if isinstance(a, cst.SimpleString)]
            default = keyword(call, "default")
            if set(flags) & set(_BATCH_NAMES) and int_value(default) is not None:
                found.append(int_value(default))  # type: ignore[arg-type]
        elif last_part(func_name(call) or "") == "DataLoader" and int_value(keyword(call, "batch_size")) is not None \
                and not _feeds_no_training(model, call):
            found.append(int_value(keyword(call, "batch_size")))  # type: ignore[arg-type]
    return min(found) if found else None


def _feeds_no_training(model: FileModel, loader: cst.Call) -> bool:
    """The loader is bound to a name that no training loop iterates (an extraction loader of
    ``batch_size=1`` beside the training one): its batch is not the one normalised while training."""
    bound = [name for name, values in model.index.values.items() if any(v is loader for v in values)]
    if len(bound) != 1:
        return False
    iterated: set[str] = set()
    for training in model.training_loops:
        loop: Loop | None = training.step_loop
        while loop is not None:
            iterated |= {last_part(n) for expr in loop.iterated() for n in names_in(expr)}
            loop = loop.parent
    return bool(iterated) and bound[0] not in iterated


_TRAINING_FLAG = Pattern(r"^(is_|do_)?train(ing)?$")


def _evaluation_values(model: FileModel) -> set[int]:
    """The ids of the values assigned to a batch-size name in the branch of an ``if training:`` (or
    ``if not args.train:``) that runs when the file does not train: PAWS's fine-tuning sets
    ``batch_size = 256`` to train and ``batch_size = 16`` in the ``else`` that only evaluates."""
    if "train" not in model.source:
        return set()
    found: set[int] = set()
    for node in walk(model.module, into_functions=True):
        if not isinstance(node, cst.If):
            continue
        test, negated = node.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negated = test.expression, True
        name = dotted(test)
        if name is None or not _TRAINING_FLAG.match(last_part(name)):
            continue
        block = node.body if negated else (node.orelse.body if isinstance(node.orelse, cst.Else) else None)
        if block is None:
            continue
        for stmt in lines(block):
            for small in (stmt.body if type(stmt) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) else ()):
                if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Name) and t.target.value in _BATCH_NAMES for t in small.targets):
                    found.add(id(small.value))
    return found
