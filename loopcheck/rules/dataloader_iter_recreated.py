"""## What it does
Checks for `next(iter(loader))` inside a training loop: a fresh iterator over a DataLoader (or
dataset) is created on every step to take one batch from it. Also spelled
`loader.__iter__().__next__()`, `it = iter(loader)` bound again in the loop body before
`next(it)`, or inside a same-file helper the loop calls on every step (`self.get_batch()`). A
loader handed to the function that runs the loop (`def train(self, dataloader, num_steps)`) is what
the file's calls pass for it (also where the file calls it from an epoch loop, `train(model,
train_loader, optimizer)` once per epoch), or, called from elsewhere, what its name says. Also
checked in a loop that runs no backward (an evaluation loop, in a file with a training loop) where
it counts the loader's batches (`for i in range(len(loader)):`, also through `tqdm`, `enumerate` or
a name bound to `len(loader)`) and takes one on every iteration, also in a function named `test`.

## Why is this bad?
Every `iter(loader)` starts a new epoch of the loader: its worker processes are started again
(seconds per step with `num_workers > 0`) and, without shuffling, it yields the same first batch
every time, so the model trains on one batch over and over. With shuffling it silently samples
with replacement and ignores epoch boundaries. An evaluation loop meant as one pass over the
loader scores its first batch `len(loader)` times (or a random sample with replacement), so the
metric is not the dataset's. Taking one batch outside the loop (to get shapes or a fixed
visualisation batch), under a condition, or in an `except StopIteration` handler is not flagged,
nor is an iterator bound once per epoch in an outer loop and advanced in the inner one, an
evaluation loop of another count (`for _ in range(1):`) or one that can stop early (`break`), nor
`next(iter(x))` where the file binds `x` to an iterator or generator (`iter()` returns it,
advanced), a tensor or list, or a loader over an `IterableDataset` class of the file or of a project module it imports (a stream: FinRL's
`RLDataset`, whose `__iter__` yields a replay buffer's fresh sample),
nor a loader of a project class whose `__iter__` goes on with one iterator its `__init__` made
(yolov5's `InfiniteDataLoader`: `self.iterator = super().__iter__()`, then `yield next(self.iterator)`),
built in the file or by a factory of the file or of the project module it imports
(`train_loader, dataset = create_dataloader(...)`): `iter()` of it hands out the next batch.
Nor is a training loop's `next(iter(loader))` over a `DataLoader(..., shuffle=True)` (or, beside the loader
the loop iterates, one with a random sampler: DARTS's search batch from `sampler=SubsetRandomSampler(...)`)
without worker processes (`num_workers` left out or 0), the only loader the file binds to that name, in a
loop that does not run `len(loader)` steps of it as an epoch: each step draws one batch at random from a
new permutation (learn2learn's one random episode per step, a book's "each epoch is one random batch"),
which code written that way means, and no worker restarts. Nor is a batch drawn only to read its shape (SynFlow's
`(data, _) = next(iter(loader))`, then `list(data[0, :].shape)` for an all-ones probe each pruning round):
no batch is trained on.

## Fix
Create the iterator once and advance it: `it = iter(loader)` before the loop, `batch = next(it)`
inside (re-creating it on `StopIteration`), or iterate `for batch in loader:`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import libcst as cst

from loopcheck.model import Event, FileModel, Kind, Loop
from loopcheck.model.iterators import first_batch_of, iterated
from loopcheck.model.syntax import (children, dotted, func_name, int_value, keyword, last_part, names_in, positional,
                                    source, target_names, walk)
from loopcheck.model.training import bound_to_data, is_data_iterable, is_data_loop
from loopcheck.project.loaders import resumes, resumes_imported
from loopcheck.project.walk import parsed
from loopcheck.rules._base import Rule, Violation


class DataloaderIterRecreated(Rule):
    code = "LC604"
    message = "next(iter(loader)) inside the training loop restarts the loader on every step"
    requires_all = ("iter",)  # `iter(loader)` or `loader.__iter__()`, inside a training loop (the default `requires`)

    VALID = [
        """
train_iter = iter(train_loader)
for step in range(max_steps):
    try:
        x, y = next(train_iter)
    except StopIteration:
        train_iter = iter(train_loader)
        x, y = next(train_iter)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
sample_x, _ = next(iter(val_loader))
device = next(iter(model.parameters())).device
for x, y in train_loader:
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
def test_sync_with_repeated_batch(ddp_model, dataloader):
    for _ in range(3):
        x, y = next(iter(dataloader))
        with ddp_model.no_sync():
            ddp_model(x).sum().backward()
""",
        """
def show_batch(model, val_loader):
    for _ in range(1):
        x, y = next(iter(val_loader))
        save_figure(x, model(x).argmax(1), y)

for epoch in range(epochs):
    for x, y in train_loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    show_batch(model, val_loader)
""",
        """
for epoch in range(epochs):
    train_iter = iter(train_loader)
    for step in range(steps_per_epoch):
        x, y = next(train_iter)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    ]
    INVALID = [
        """
def evaluate(model, val_loader):
    correct = 0
    with torch.no_grad():
        for i in range(len(val_loader)):
            x, y = next(iter(val_loader))  # LC604
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(val_loader.dataset)

for epoch in range(epochs):
    for x, y in train_loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(evaluate(model, val_loader))
""",
        """
for step in range(max_steps):
    x, y = next(iter(train_loader))  # LC604
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
for step in range(max_steps):
    train_iter = iter(train_loader)
    x, y = next(train_iter)  # LC604
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
class Trainer:
    def get_batch(self):
        return self.loader.__iter__().__next__()  # LC604

    def train(self, steps):
        for step in range(steps):
            x, y = self.get_batch()
            loss = self.criterion(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        reported: set[int] = set()
        for restart in model.events(Kind.LOADER_RESTART):
            if restart.lifted and id(restart.node) not in reported and _pass_over_repeated(model, restart):
                reported.add(id(restart.node))
                yield self.at(restart, _evaluation_message(restart))
        for training in model.training_loops:
            for restart in training.loop.events(Kind.LOADER_RESTART):
                if id(restart.node) in reported:
                    continue
                if training.loop.function is not None and training.loop.function.name.value.startswith("test") \
                        and not _counts_batches_of(training.loop, restart.value, training.loop.parent):
                    continue  # a test re-reads a fixed first batch on purpose (not in a loop over the loader's length)
                loader = _passed(model, training.loop, restart)
                if not (is_data_iterable(loader) or bound_to_data(dotted(loader), model.index.values)):
                    continue  # `next(iter(model.parameters()))` and the like take no data
                if _no_pass_to_restart(model, loader):
                    continue  # `iter()` of it starts no new pass over a loader
                if any(c.test is None for c in restart.conds) or not training.reader.guard(restart.conds, restart.order).always:
                    continue  # once per epoch, in an except handler, or every N steps
                if _rebuilt(training.loop, restart.receiver):
                    continue  # the loader itself is rebuilt in the loop: its first pass, not a restart
                if _goes_on(model, loader):
                    continue  # yolov5's InfiniteDataLoader: `iter()` of it hands out its one iterator
                drawn = {n for n in (restart.receiver, dotted(loader)) if n}
                if _random_batch(model, loader, _beside_another_loader(training.loop, drawn)) \
                        and not _counts_its_batches(training.loop, drawn):
                    continue  # a shuffling loader without workers: a random batch per step, nothing restarted
                if _shape_only(restart, training.loop):
                    continue  # `data, _ = next(iter(loader))` read for `data.shape` alone: no batch is trained on
                yield self.at(restart, f"{_how(restart, loader)}: the loader starts over each time (its worker "
                                       "processes too, and its sampler: a shuffling loader draws from a new "
                                       "permutation, one without shuffling yields the same first batch every step)")


_SHAPE_READS = frozenset({"shape", "size", "dtype", "device", "ndim", "dim"})


def _shape_only(restart: Event, loop: Loop) -> bool:
    """The batch ``next(iter(loader))`` draws is bound to names that the function reads only for its
    shape (``input_dim = list(data[0, :].shape)``, ``len(x)``, ``x.size(1)``): SynFlow's all-ones
    input built from the data's shape trains on no batch, so which batch comes out does not matter."""
    stmt = restart.stmt
    if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1:  # type: ignore[attr-defined]
        stmt = stmt.body[0]  # type: ignore[attr-defined]
    if type(stmt) is not cst.Assign or len(stmt.targets) != 1:  # type: ignore[attr-defined]
        return False
    bound = set(target_names(stmt.targets[0].target)) - {"_"}  # type: ignore[attr-defined]
    scope = restart.origin or loop.function
    if not bound or scope is None:
        return False
    allowed: set[int] = set()
    uses: list[cst.Name] = []
    for node in walk(scope.body):
        if type(node) is cst.Attribute:
            allowed.add(id(node.attr))  # `p.grad.data` names an attribute, not the variable
            if node.attr.value in _SHAPE_READS:  # type: ignore[attr-defined]
                allowed.update(id(n) for n in walk(node.value))  # type: ignore[attr-defined]
        elif type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len":  # type: ignore[attr-defined]
            allowed.update(id(n) for a in node.args for n in walk(a.value))  # type: ignore[attr-defined]
        elif type(node) is cst.Name and node.value in bound:  # type: ignore[attr-defined]
            uses.append(node)  # type: ignore[arg-type]
    targets = {id(n) for n in walk(stmt.targets[0].target)}  # type: ignore[attr-defined]
    read = [n for n in uses if id(n) not in targets]
    return bool(read) and all(id(n) in allowed for n in read)


def _pass_over_repeated(model: FileModel, restart: Event) -> bool:
    """``restart`` runs on every iteration of a loop without backward (an evaluation loop, lifted
    into the loop or function around it) that counts the loader's batches (``for i in
    range(len(loader)):``): the loop means one pass over the loader and takes its first batch
    ``len(loader)`` times instead. A loop of another count (``range(1)``, a few visualised batches)
    or one that may stop early (``break``, ``return``) takes what it means to take."""
    counting = restart.lifted[-1]  # the innermost loop the restart ran in
    outer = {id(c) for loop in restart.lifted for c in loop.conds}
    if any(id(c) not in outer for c in restart.conds):
        return False  # under a test, or in an except handler, inside that loop
    if not isinstance(counting.node, cst.For) or _stops_early(counting.node):
        return False
    if not _counts_batches_of(counting, restart.value, restart.loop):
        return False
    loader = _passed(model, restart.loop, restart)
    sources = [loader] if loader is not None else \
        model.index.arguments.get(f"{restart.origin.name.value}({dotted(restart.value)})", []) \
        if restart.origin is not None else []
    if not sources or not all(is_data_iterable(s) or bound_to_data(dotted(s), model.index.values) for s in sources):
        return False
    if any(_no_pass_to_restart(model, s) for s in [*sources, restart.value]) or any(_goes_on(model, s) for s in sources):
        return False
    return not any(restart.receiver in a.names and counting in a.lifted and not isinstance(a.node, cst.Call)
                   for a in restart.loop.assignments)  # the loader rebuilt in the loop


def _stops_early(loop: cst.For) -> bool:
    """A ``break`` or ``return`` of the loop's own body (not of a loop or function inside it)."""
    def visit(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Break, cst.Return)):
            return True
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        return any(visit(child) for child in children(node))
    return visit(loop.body)


_COUNTED = {"tqdm", "enumerate"}  # wrappers that keep the count
_RANGES = {"range", "trange"}


def _counts_batches_of(loop: Loop, loader: cst.BaseExpression | None, around: Loop | None) -> bool:
    """``loop`` iterates ``range(len(loader))`` (through ``tqdm`` / ``enumerate``, or a name bound to
    the count before it in ``around`` or a loop around that: ``n = len(loader)``; ``for i in
    tqdm(range(n), total=n):``)."""
    name = dotted(loader)
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and last_part(func_name(iterable) or "") in _COUNTED and positional(iterable):
        iterable = positional(iterable)[0]
    if name is None or not isinstance(iterable, cst.Call) or last_part(func_name(iterable) or "") not in _RANGES:
        return False
    args = positional(iterable)
    if len(args) == 2 and int_value(args[0]) == 0:
        args = args[1:]
    if len(args) != 1:
        return False
    count = args[0]
    while isinstance(count, cst.Name) and around is not None:
        bound = around.assignments_before(count.value, loop.order)
        if bound:
            count = bound[-1].value if bound[-1].op == "=" and bound[-1].names == (count.value,) else None
            break
        around = around.parent
    return isinstance(count, cst.Call) and func_name(count) == "len" and len(positional(count)) == 1 \
        and dotted(positional(count)[0]) == name


def _passed(model: FileModel, loop: Loop, restart: Event) -> cst.BaseExpression | None:
    """What the restart iterates, followed through a same-file helper's parameter to the caller's
    argument (``def get_batch(loader): return next(iter(loader))`` called as ``get_batch(train_dl)``).
    A parameter of the function that runs the loop itself (``def train(model, train_loader, steps)``)
    is what the file's calls pass for it, where they all pass the same name, else the parameter (its
    name says whether it is data, as a name bound nowhere in the file does)."""
    loader = restart.value
    if restart.origin is None or not isinstance(loader, cst.Name):
        return loader
    params = {p.name.value for p in [*restart.origin.params.params, *restart.origin.params.kwonly_params]}
    if loader.value not in params:
        return loader
    bindings = [a for a in loop.assignments_before(loader.value, restart.order) if isinstance(a.node, cst.Call)]
    outer = loop.parent
    while not bindings and outer is not None:  # the function that runs the loop, inlined in an enclosing loop
        bindings = [a for a in outer.assignments_before(loader.value, restart.order) if isinstance(a.node, cst.Call)
                    and last_part(func_name(a.node) or "") == restart.origin.name.value]
        outer = outer.parent
    if bindings:
        return bindings[-1].value
    passed = model.index.arguments.get(f"{restart.origin.name.value}({loader.value})", [])
    names = {dotted(p) for p in passed}
    if restart.origin is not loop.function:
        # A helper inlined in the loop, or the function that runs it inlined in an enclosing loop, whose
        # calls bind the parameter to a name of the same spelling (no binding made): that name; else nothing.
        return passed[0] if len(names) == 1 and loader.value in names else None
    return passed[0] if len(names) == 1 and None not in names else None if passed else loader


# Calls that return an iterator (or a generator), never a fresh pass: `iter()` of one is itself.
_ITERATORS = {"iter", "cycle", "islice", "chain", "repeat", "tee", "zip_longest", "map", "filter"}
_TENSORS = {"tensor", "as_tensor", "from_numpy", "randn", "rand", "randint", "zeros", "ones", "arange", "linspace",
            "empty", "full", "stack", "cat"}


def _no_pass_to_restart(model: FileModel, loader: cst.BaseExpression) -> bool:
    """What the file binds the name to is already an iterator (``data_iter = iter(loader)``, a
    generator, ``itertools.cycle(loader)``: ``iter()`` of it returns it, advanced), a list or tensor
    (nothing to restart), or a loader over an ``IterableDataset`` class of the file or of a project
    module (a stream: what a new pass yields is up to its ``__iter__``, often fresh random samples). Any such binding is enough."""
    name = dotted(loader)
    if name is None:
        return False
    values = list(model.index.values.get(last_part(name), ()))
    for value in values:
        if isinstance(value, (cst.GeneratorExp, cst.List, cst.ListComp, cst.Tuple)):
            return True
        if not isinstance(value, cst.Call):
            continue
        called = func_name(value) or ""
        if iterated(value) is not None or last_part(called) in _ITERATORS or _generator(model, called) \
                or called.startswith("torch.") and last_part(called) in _TENSORS:
            return True
        dataset = (positional(value) or [keyword(value, "dataset")])[0]
        if last_part(called) == "DataLoader" and dataset is not None and _streams(model, dataset):
            return True
    return False


def _goes_on(model: FileModel, loader: cst.BaseExpression | None) -> bool:
    """The file binds ``loader`` to an instance of a loader class of the project whose ``__iter__``
    goes on with one iterator made in ``__init__`` (``loopcheck.project.loaders``): built here, or by
    a factory of this file or of the project module it is imported from (``train_loader, dataset =
    create_dataloader(...)``). Any such binding is enough."""
    name = dotted(loader) if loader is not None else None
    if name is None:
        return False
    tree: ast.Module | None = None
    for value, position in _bindings(model, name):
        called = func_name(value)
        if not called:
            continue
        if "." not in called:
            if tree is None:
                tree = parsed(model.source or model.module.code) or ast.Module(body=[], type_ignores=[])
            if resumes(tree, called, position):
                return True
        if model.project is not None and resumes_imported(model.project, called, position):
            return True
    return False


def _random_batch(model: FileModel, loader: cst.BaseExpression, beside: bool) -> bool:
    """Every binding of ``loader`` in the file is a ``DataLoader(..., shuffle=True)`` (or, ``beside`` the
    loader the loop iterates, with a random sampler: ``sampler=SubsetRandomSampler(...)``) with no worker
    processes (``num_workers`` left out or 0): a new iterator starts no workers and draws a new
    permutation, so each step takes a batch at random (sampling with replacement, a scheme training
    code uses on purpose: one random batch or episode per step), at the cost of one permutation."""
    name = dotted(loader)
    calls = [value for value, position in _bindings(model, name) if position is None] if name else []
    return bool(calls) and len(calls) == len(list(_bindings(model, name or ""))) and all(
        last_part(func_name(call) or "") == "DataLoader" and (_literal(keyword(call, "shuffle")) == "True"
                                                               or beside and _random_sampler(keyword(call, "sampler")))
        and _literal(keyword(call, "num_workers"), "0") == "0" for call in calls)


def _beside_another_loader(loop: Loop, names: set[str]) -> bool:
    """The loop iterates a loader other than the one it draws from (DARTS's search batch, drawn from
    ``valid_queue`` on each step over ``train_queue``): the extra batch is a side draw."""
    iterated = {last_part(n) for expr in loop.iterated() for n in names_in(expr)}
    return is_data_loop(loop) and not iterated & {last_part(n) for n in names}


def _counts_its_batches(loop: Loop, names: set[str]) -> bool:
    """The loop runs ``len(loader)`` steps of the loader it draws from (``for step in
    trange(len(data_iterator)):``): an epoch meant to cover the data once, which random draws do not."""
    return any(type(n) is cst.Call and func_name(n) == "len" and n.args and dotted(n.args[0].value) in names  # type: ignore[attr-defined]
               for expr in loop.iterated() for n in walk(expr))


_RANDOM_SAMPLERS = frozenset({"RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler"})


def _random_sampler(value: cst.BaseExpression | None) -> bool:
    """``sampler=SubsetRandomSampler(indices[split:])``: a sampler that draws a new random order per iterator."""
    return type(value) is cst.Call and last_part(func_name(value) or "") in _RANDOM_SAMPLERS  # type: ignore[arg-type]


def _literal(value: cst.BaseExpression | None, missing: str = "") -> str:
    """The source of a keyword's value where it is a literal name or integer, ``missing`` where the
    keyword is left out, else ""."""
    if value is None:
        return missing
    return source(value) if isinstance(value, (cst.Name, cst.Integer)) else ""


def _bindings(model: FileModel, name: str) -> Iterator[tuple[cst.Call, int | None]]:
    """The calls the file assigns to ``name``, with the position of ``name`` where it is unpacked
    from the call's result (``loader, dataset = create_dataloader(...)``: 0)."""
    for node in walk(model.module, into_functions=True):
        if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            continue
        for target in node.targets:
            if dotted(target.target) == name:
                yield node.value, None
            elif isinstance(target.target, (cst.Tuple, cst.List)):
                for position, element in enumerate(target.target.elements):
                    if dotted(element.value) == name:
                        yield node.value, position


def _generator(model: FileModel, called: str) -> bool:
    """``called`` is a generator function of this file (its body yields)."""
    return any(isinstance(node, (cst.Yield,)) for fn in model.index.functions.get(last_part(called), ())
               for node in walk(fn))


def _streams(model: FileModel, dataset: cst.BaseExpression) -> bool:
    """``dataset`` is (or names) an instance of a class derived from ``IterableDataset``, of this file
    or of a project module it imports (FinRL's ``RLDataset``, whose ``__iter__`` yields a replay
    buffer's fresh sample)."""
    values = [dataset]
    if dotted(dataset):
        values += model.index.values.get(last_part(dotted(dataset) or ""), [])
    built = {func_name(v) or "" for v in values if isinstance(v, cst.Call)} - {""}
    if any(isinstance(node, cst.ClassDef) and node.name.value in {last_part(b) for b in built}
           and any("IterableDataset" in (dotted(b.value) or "") for b in node.bases) for node in model.module.body):
        return True
    return model.project is not None and any("IterableDataset" in (model.project.class_bases(b) or "") for b in built)


def _rebuilt(loop: Loop, name: str | None) -> bool:
    """``name`` is assigned in the loop (or a loop inside it) by a statement, not by binding a helper's
    parameter to the caller's argument."""
    return any(name in a.names and not isinstance(a.node, cst.Call) for a in loop.assignments) \
        or any(_rebuilt(sub, name) for sub in loop.loops)


def _evaluation_message(restart: Event) -> str:
    loader = source(restart.value)
    return (f"{_how(restart, restart.value).replace(' on every step', ' on every iteration')} of a loop over "
            f"its `len({loader})` batches: the loader starts over each time (its worker processes too), so the "
            f"loop never makes one pass over the data: it sees the first batch `len({loader})` times (a loader "
            "without shuffling) or batches drawn at random with replacement (a shuffling loader), and what it "
            "computes from them (an evaluation metric) comes from those batches, not from the dataset")


def _how(restart: Event, loader: cst.BaseExpression) -> str:
    """What makes the new iterator, as the message names it."""
    taken = f"`{source(restart.node)}`"
    if restart.site is not None:
        taken += f" (run through `{source(restart.site[0])}`)"
    if first_batch_of(restart.node) is None:  # type: ignore[arg-type]
        return f"{taken} reads an iterator that the loop binds again on every step " \
               f"(a new iterator over `{source(loader)}`)"
    return f"{taken} creates a new iterator over `{source(loader)}` on every step"
