"""## What it does
Checks for a graph-carrying tensor of a training loop (the loss that is back-propagated, the trained
model's outputs, or what a helper of the same file computes from them, such as a dict of loss terms)
accumulated (`total_loss += loss`, `totals[name] += value`) or stored (`losses.append(loss)`, a slot of
a list made before the loop, `losses[k] = loss` or `hist[epoch][k] = loss` with `k` the loop's variable
or a counter it adds to, or handed to an object that keeps it, such as an `AverageMeter` of the project
whose `losses.update(loss, n)` adds it into `self.sum`) across iterations without `.item()` or
`.detach()`. A loss appended to a history and back-propagated as `losses[-1]` is kept too: the history
holds every earlier loss with its graph. A dict of losses whose item is back-propagated
(`loss["total"].backward()`) holds that item's graph: keeping the dict, or adding up that item, is
flagged (other keys, which may be numbers, are not read as graphs; the dict gets no `.detach()` fix, it
has none). horovod's `hvd.allreduce(loss.cpu())` is differentiable, so what it returns carries the graph
on. What a helper of the file returns is read from its `return` (`return d_loss.item(),
d_proba_fake.detach()` keeps no graph), and a local variable of another helper the loop calls
(`d_proba_fake = disc(fake)` inside `g_train`) is not the loop's variable of that name.

## Why is this bad?
A tensor that requires grad keeps a reference to the autograd graph that produced it. Summing
or collecting it across iterations chains those graphs together, so memory grows with every
step (and the outputs of the model stay on the GPU) until the job slows down or runs out of
memory, often hours in (where what is kept is the loss already back-propagated, backward has freed
the saved activations and what piles up is the graph's node objects, much less: the finding says so;
measured on an H200 for a 62-module CNN, no device memory at all and about 67 KB of host memory a
step, whatever the batch, against 164 MB a step of device memory for a loss never back-propagated:
benchmarks/results/graph-memory-s24).

A back-propagated loss (or the mean of a term it was built from: `losses_reg.append(loss_reg.mean())`,
or a running mean of it: `running_loss += (loss - running_loss) / step`) kept in a sum or list made
anew before every pass over the data (`running_loss = 0.0` at the top of each epoch, or in an epoch
function before its loop) keeps one pass's nodes in host memory and frees them at the next pass,
unless something made before the passes keeps the pass's sum after it
(`train_losses.append(running_loss / n)` in the epoch loop: every pass's nodes then stay to the end,
reported by default): that shape is reported only with

```toml
[tool.loopcheck.loss-kept-with-graph]
after-backward = true
```

Kept for the whole run (a sum made once before the epochs, or before a loop counted in steps), or never
back-propagated, it is reported by default. Turn the setting on where the graph runs through custom
autograd Functions that keep tensors on `ctx` outside `save_for_backward` (some renderers and CUDA
extensions): backward frees only what was saved, so there each kept node holds device memory too (the
out-of-memory reports behind real fixes of this shape, such as MVTN's issue #2 with a PyTorch3D
renderer). At run time, `loopcheck run` measures the growth itself (LC602).
`.item()`, `.detach()`, `float(...)` and values computed under
`torch.no_grad()` (or after a `torch.set_grad_enabled(False)` statement of the same block) hold no graph and are not flagged, nor are the numbers a model of another
module of the project returns beside its loss (`return lm_loss, lm_loss.item()` in its
`forward`); neither is a running sum that is itself back-propagated (a loss summed over micro-batches on purpose), nor
one a function makes empty before its loop on every call and returns to a caller of the same file that
back-propagates it (a learned optimizer's unrolled meta-loss). Nor one made anew at the top of each
item of a loader (`batches_loss_sum = torch.tensor(0.0)` in `for batches in loader:`) that a training
loop over the pieces of that item adds to: it keeps one item's graphs. Neither is a list or a total made fresh
for one optimizer step (`losses = []`, `total = torch.zeros(n)` or `total = None` before `for _ in
range(gradient_accumulation_steps):`, or before an inner loop over loss terms), nor one made fresh
whenever it is filled from one iteration's tensors (`show = []` in the logging branch that then
appends the prediction's channels to it; a loop over a loader between the two, or one that runs the
model, still gathers a graph per batch), nor a
back-propagated loss kept by a short fixed run such as a test's `for _ in range(5):` (a function's own
`for _ in range(max_iter):` with `max_iter=1000` is a whole optimisation, not a short run), summed into
a total that a periodic logging branch resets (`if i % log_interval == 0: ...; total = 0`), or summed
by a loop of a function that steps nowhere in it, over the pieces of one step rather than a loader,
into a total the function binds before it on every call (GradCache's `training_step` over the chunks
of one batch): backward has freed their activations and what stays is bounded. An `append` to an
object built only by a class of an installed library (MONAI's `run_loss = CumulativeAverage()` then
`run_loss.append(loss, count=n)`, which detaches and keeps a sum) is the library's to keep, not a
Python list's; `deque`, `UserList` and a class of the project's own modules still are read as lists,
except a `deque(maxlen=128)`, which keeps only the last values (a logging window: bounded).
A meter whose `update` keeps only the latest value (`self.val = val`), or takes the number itself
(`self.sum += val.item() * n`), keeps no graph across iterations.

## Fix
Keep a number, not the tensor: `total_loss += loss.item()` (or `loss.detach()` to stay on
the device), `losses.append(loss.item())`, `outputs.append(logits.detach())`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Fix, replace
from loopcheck.model import Assignment, Event, FileModel, Kind, Loop
from loopcheck.model.horizon import ACCUMULATION_NAME
from loopcheck.model.memory import (
    GraphReader,
    backpropagated_names,
    graph_reads,
    module_name,
    target_position,
    trained_modules,
)
from loopcheck.model.guards import exclusive
from loopcheck.model.syntax import children, dotted, func_name, int_value, is_none, keyword, last_part, method, names_in, source, target_names, walk
from loopcheck.model.training import Style, TrainingLoop, is_data_iterable, is_data_loop, micro_count, pieces_of_one_batch
from loopcheck.rules._base import Rule, Violation


class LossKeptWithGraph(Rule):
    code = "LC601"
    fixable = True
    message = "a graph-carrying tensor is kept across iterations without .item()/.detach()"

    VALID = [
        """
for epoch in range(epochs):
    running_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss
    print(epoch, running_loss.item() / len(loader))
""",
        """
for mel, audio in loader:
    loss_d_sum = 0.0
    for _ in range(rep_discriminator):
        optim_d.zero_grad()
        loss_d = d_loss(discriminator, generator(mel).detach(), audio)
        loss_d.backward()
        optim_d.step()
        loss_d_sum += loss_d
    writer.add_scalar("loss_d", (loss_d_sum / rep_discriminator).item())
""",
        """
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
""",
        """
losses = []
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
    epoch_loss += loss.data[0] * x.size(0)
    with torch.no_grad():
        running += loss
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    acc_loss = acc_loss + loss / accum_steps
    if (i + 1) % accum_steps == 0:
        acc_loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        acc_loss = 0
""",
        """
window = []
model.train()
for i, (x, y) in enumerate(loader):
    logits = model(x)
    loss = criterion(logits, y)
    window.append(loss)
    if (i + 1) % accum_steps == 0:
        total = torch.stack(window).mean()
        total.backward()
        optimizer.step()
        optimizer.zero_grad()
        window.clear()
""",
        """
for step, (x, y) in enumerate(loader):
    preds = model(x)
    loss = criterion(preds, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % show_every == 0:
        show = []
        for k in range(preds.shape[1]):
            show.append(preds[:, k])
        writer.add_image("preds", make_grid(torch.cat(show).unsqueeze(1)), step)
""",
    ]
    INVALID = [
        """
total_loss = 0.0
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # LC601
""",
        """
history, predictions = [], []
model.train()
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        history.append(loss)  # LC601
        predictions.append(logits)  # LC601
""",
        """
losses = []
for step in range(max_steps):
    for micro in range(accum_steps):
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        losses.append(loss)  # LC601
    optimizer.step()
    optimizer.zero_grad()
""",
        """
def compute_loss(outputs, y):
    box, cls = F.l1_loss(outputs[:, :4], y[:, :4]), F.cross_entropy(outputs[:, 4:], y[:, 4])
    return box + cls, {"box": box, "cls": cls}

totals = {}
model.train()
for x, y in loader:
    optimizer.zero_grad()
    loss, parts = compute_loss(model(x), y)
    loss.backward()
    optimizer.step()
    for name, value in parts.items():
        totals[name] = totals.get(name, 0) + value.item()
        running[name] += value  # LC601
""",
        """
losses = []
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)  # LC601
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        backpropagated: set[str] | None = None
        for training in model.training_loops:
            reader: GraphReader | None = None
            for holder, container, value, node, stmt in _kept(training, model):
                if _reset_every_iteration(training, container) or _window_local(training, container) \
                        or _made_empty_before(training, container, holder):
                    continue
                if _made_fresh_to_fill(training, container, holder, model):
                    continue
                if isinstance(holder, Event) and holder.target:
                    # a meter of the file: whether the value holds a graph settles it, read first (the
                    # file-wide tests below cost more, and most meters are handed numbers or metrics)
                    reader = reader or GraphReader(model, training)
                    if reader.carries(value, holder.order, holder.conds) is not True:
                        continue
                newest = _newest_backpropagated(training, model, container, holder)
                if backpropagated is None:
                    backpropagated = backpropagated_names(model)
                if container in backpropagated and newest is None:
                    continue  # kept on purpose: a backward later runs through it
                if _returned_to_backward(training, container, model):
                    continue  # kept on purpose: the caller back-propagates the returned sum
                reader = reader or GraphReader(model, training)
                # the very loss back-propagated this iteration: what stays is bounded by the runs below
                propagated = newest is not None or _backpropagated_binding(reader, value, holder, container)
                if (_short_fixed_run(training) or _reset_periodically(training, container)
                        or _reset_around_repeats(training, container) or _one_step_per_call(training, container)) \
                        and propagated:
                    continue
                if _made_anew_per_item(training, container):
                    continue  # one loader item's pieces: what it keeps is freed with the item
                known = len(reader.sources)
                if newest is not None or reader.carries(value, holder.order, holder.conds) is True:
                    verb = "accumulated into" if isinstance(holder, Assignment) and holder.op != "=" else "stored in"
                    # the other module's function the graph was read through
                    via = f" (returned by {reader.sources[known]})" if len(reader.sources) > known else ""
                    keeper = model.project.where(node) if model.project is not None and verb == "stored in" else None
                    if keeper is None and isinstance(holder, Event) and holder.target:
                        keeper = f"`{holder.target}`"  # a method of a class of this file
                    kept = f" (kept by {keeper})" if keeper else ""
                    # emptied every N iterations (`metrics = []` at the step): it holds one window's graphs, not all
                    grows = "until it is emptied, every N iterations: up to N iterations' graphs are kept at once" \
                        if _reset_periodically(training, container) else "across iterations: memory grows every step"
                    if propagated and not _retained(training, value, newest):
                        if newest is None and not model.options.graphs_after_backward \
                                and _made_anew_per_pass(training, container):
                            past = _kept_past_pass(training, container)
                            if past is None:
                                continue  # host memory for one pass's autograd nodes, none on the device: opt-in
                            grows += f", and `{past}` keeps each pass's sum, so every pass's graph stays to the end"

                        # measured on CPU: about 20 KB a step for a 3-layer MLP, 70 KB for a 139-node CNN,
                        # against about 5 MB a step where the activations stay
                        grows += " (by the graph's nodes only: its backward already freed the saved activations)"
                    if newest is not None:  # `.detach()` here would leave `losses[-1].backward()` nothing to run
                        yield Violation(node, stmt, f"`{source(value)}` still carries its autograd graph and is "
                                                    f"{verb} `{container}` {grows}; back-propagate the loss itself "
                                                    f"rather than `{container}[-1]`, and keep `.item()` or `.detach()`")
                        continue
                    # a dict of losses (`loss["total"].backward()`) has no `.detach()`: its items need one each
                    whole_dict = any(n == dotted(value) for n, *_ in reader.backpropagated_items)
                    yield Violation(node, stmt, f"`{source(value)}` still carries its autograd graph{via} and is {verb} "
                                                f"`{container}`{kept} {grows}; keep `.item()` or `.detach()` instead",
                                    None if whole_dict else _detach(value))


def _newest_backpropagated(training: TrainingLoop, model: FileModel, container: str, holder: object) -> Event | None:
    """The backward of this iteration that runs on ``container[-1]``, the value just appended
    (``losses.append(reduce(lambda x, y: x + y, loss))`` then ``losses[-1].backward()``), where every
    backward of the file reads the list that way only: what is appended is a loss, and the list keeps
    every earlier one with its graph, none of which is back-propagated again."""
    if not isinstance(holder, Event) or not isinstance(holder.node, cst.Call) or holder.target \
            or method(holder.node) is None or method(holder.node)[1] != "append":  # type: ignore[index]
        return None
    if any(b.loss is not None and container in names_in(b.loss) and not _newest_of(b.loss, container)
           for b in model.events(Kind.BACKWARD)):
        return None  # the list itself is back-propagated (`torch.stack(losses).sum()`)
    return next((b for b in training.backwards if b.loss is not None and _newest_of(b.loss, container)
                 and b.order > holder.order and not exclusive(b.conds, holder.conds)), None)


def _newest_of(loss: cst.BaseExpression, container: str) -> bool:
    """``losses[-1]`` (also ``losses[-1].mean()``, ``scaler.scale(losses[-1])``)."""
    while isinstance(loss, cst.Call):
        called = method(loss)
        if called is not None and called[1] == "scale" and len(loss.args) == 1:
            loss = loss.args[0].value
        elif called is not None and not loss.args:
            loss = called[0]
        else:
            return False
    return isinstance(loss, cst.Subscript) and dotted(loss.value) == container and len(loss.slice) == 1 \
        and isinstance(loss.slice[0].slice, cst.Index) and int_value(loss.slice[0].slice.value) == -1


def _retained(training: TrainingLoop, value: cst.BaseExpression, newest: Event | None) -> bool:
    """The backward that ran on ``value`` (or ``newest``, on the list's last element) was told
    ``retain_graph=True``: the saved activations stay with the graph it keeps, not just its nodes."""
    name = dotted(value)
    runs = [newest] if newest is not None else [b for b in training.backwards
                                                 if name is not None and b.loss is not None and dotted(b.loss) == name]
    return any(isinstance(b.node, cst.Call) and any(
        a.keyword is not None and a.keyword.value == "retain_graph" and not (
            isinstance(a.value, cst.Name) and a.value.value in ("False", "None")) for a in b.node.args) for b in runs)


def _detach(value: cst.BaseExpression) -> Fix:
    """Keep ``value.detach()``: the same tensor values, without the graph (``.item()`` would change
    the type the code goes on to use)."""
    simple = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
    return replace(value, f"{source(value)}.detach()" if simple else f"({source(value)}).detach()",
                   f"keep `{source(value)}.detach()`")


def _kept(training: TrainingLoop, model: FileModel | None = None) -> Iterator[tuple[object, str, cst.BaseExpression, cst.CSTNode, cst.CSTNode]]:
    """(holder, container, value kept, node, statement) for `c += v`, `c = c + v`, `c.append(v)`."""
    for store in training.loop.events(Kind.STORE):
        call = store.node
        # `c.append(v)`, or a method of another module's class that keeps its argument (`avg.update_value(k, v)`)
        if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value != "extend"
                and store.value is not None and dotted(call.func.value) and not store.in_context("no_grad")):
            container = dotted(call.func.value)
            if call.func.attr.value in ("append", "appendleft") and (
                    _library_object(model, container) or _bounded(model, container)):  # type: ignore[arg-type]
                continue
            yield store, container, store.value, store.node, store.stmt  # type: ignore[misc]
    for assignment in training.loop.assignments:
        if any(c.kind == "no_grad" for c in assignment.contexts):
            continue
        if not assignment.names and assignment.op == "AddAssign":
            name = _keyed_container(assignment.node)  # `totals[name] += value`
            if name is not None:
                yield assignment, name, assignment.value, assignment.node, assignment.node
            continue
        if not assignment.names and assignment.op == "=":
            name = _indexed_store(assignment.node, training.loop)  # `losses[k] = loss`, k moving on
            if name is not None:
                yield assignment, name, assignment.value, assignment.node, assignment.node
            continue
        if len(assignment.names) != 1:
            continue
        name, value = assignment.names[0], assignment.value
        if assignment.op == "AddAssign":
            yield assignment, name, value, assignment.node, assignment.node
        elif (assignment.op == "=" and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)
              and dotted(value.left) == name):
            yield assignment, name, value.right, assignment.node, assignment.node


# library classes whose `append` keeps what it is handed as a list does
_LIST_LIKE = {"UserList", "ModuleList", "ParameterList", "ListConfig", "ShareableList"}


def _library_object(model: FileModel | None, container: str | None) -> bool:
    """``run_loss`` where every binding of it in the file is a call of a class imported from an
    installed library (``from monai.metrics import CumulativeAverage`` ... ``run_loss =
    CumulativeAverage()``): its ``append`` is the library's method, which keeps what the library
    keeps (a detached running sum), not a Python list holding the graph. Lower-case callables
    (``deque``, ``list``), list-like classes, classes the file defines and classes of the project's
    own modules (a relative import, or one the project resolves) are not."""
    if model is None or container is None:
        return False
    values = model.index.values.get(last_part(container))
    if not values or not all(isinstance(v, cst.Call) for v in values):
        return False
    for value in values:
        called = func_name(value)  # type: ignore[arg-type]
        if not called or not called.split(".")[-1][:1].isupper() or called.split(".")[-1] in _LIST_LIKE:
            return False
        origin = _imported_from(model, called.split(".")[0])
        if origin is None:
            return False
        module, level = origin
        if level or model.project is not None and model.project.index.resolve(model.project.path, module, 0):
            return False
    return True


def _bounded(model: FileModel | None, container: str | None) -> bool:
    """``losses`` where every binding of it in the file is ``deque(maxlen=128)`` (a window of the last
    values for logging): what it keeps stops growing at that length."""
    if model is None or container is None:
        return False
    values = model.index.values.get(last_part(container))
    return bool(values) and all(
        isinstance(v, cst.Call) and last_part(func_name(v) or "") == "deque"
        and (maxlen := keyword(v, "maxlen")) is not None and not is_none(maxlen) for v in values)


def _imported_from(model: FileModel, name: str) -> tuple[str, int] | None:
    """(module, relative level) of the import binding ``name`` in the file, if any."""
    for node in model.index.imports:
        if isinstance(node, cst.ImportFrom):
            if isinstance(node.names, cst.ImportStar):
                continue
            module = dotted(node.module) if node.module is not None else ""
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if dotted(bound) == name:  # type: ignore[arg-type]
                    return module or "", len(node.relative)
        else:
            for alias in node.names:
                full = dotted(alias.name) or ""
                bound = dotted(alias.asname.name) if alias.asname is not None else full.split(".")[0]  # type: ignore[arg-type]
                if bound == name:
                    return full, 0
    return None


def _keyed_container(node: cst.CSTNode) -> str | None:
    """``totals`` for ``totals[key] += value`` (a dict or list of running sums)."""
    if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Subscript):
        return dotted(node.target.value)
    return None


def _indexed_store(node: cst.CSTNode, loop: Loop) -> str | None:
    """``losses`` for ``losses[k] = value`` (also ``hist[epoch, k]``, ``hist[epoch][k]``) where an index is the
    loop's own variable or a counter the loop adds to: each iteration fills another slot of a list
    made before the loop, as ``append`` would. A key that stays (``stats["loss"] = value``) overwrites."""
    if not isinstance(node, cst.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0].target,
                                                                                   cst.Subscript):
        return None
    target = node.targets[0].target
    indices = [e.slice.value for e in target.slice if isinstance(e.slice, cst.Index)]
    while isinstance(target.value, cst.Subscript):  # `hist[epoch][k]`: a slot of a list of lists
        target = target.value
        indices += [e.slice.value for e in target.slice if isinstance(e.slice, cst.Index)]
    container = dotted(target.value)
    if container is None or not indices:
        return None
    indices = [i for index in indices for i in (index.elements if isinstance(index, cst.Tuple) else [index])]
    indices = [i.value if isinstance(i, cst.Element) else i for i in indices]
    moving = {n for a in loop.assignments if a.op in ("for", "AddAssign") for n in a.names}
    return container if any(isinstance(i, cst.Name) and i.value in moving for i in indices) else None


def _window_local(training: TrainingLoop, container: str) -> bool:
    """A micro-step loop (``for _ in range(gradient_accumulation_steps):``, or one whose step
    follows it) keeping its losses in a list made fresh just before it, whenever it runs: the list
    holds one window and is dropped after it (Megatron's ``train_step``)."""
    loop = training.loop
    if loop.parent is None or is_data_loop(loop) and not pieces_of_one_batch(loop, training.backwards):
        return False
    count = micro_count(loop)
    if training.style is not Style.MICRO_LOOP and not (
            count is not None and any(ACCUMULATION_NAME.search(last_part(n)) for n in names_in(count))):
        return False
    fresh = [a for a in loop.parent.assignments
             if container in a.names and a.op == "=" and a.order < loop.order and a.conds == loop.conds]
    return bool(fresh) and _empty(max(fresh, key=lambda a: a.order).value)


def _empty(value: cst.BaseExpression) -> bool:
    """``[]``, ``{}``, ``0``, ``0.0``, ``list()``, ``defaultdict(list)``, a tensor of zeros to sum
    into (``torch.zeros(n, device=device)``, ``torch.zeros_like(x)``, ``torch.tensor(0.0)``), and
    ``None`` for a sum whose first term binds it (``total = None``, then ``total = loss`` or ``total
    += loss``)."""
    if is_none(value):
        return True
    if isinstance(value, (cst.List, cst.Dict)):
        return not value.elements
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.evaluated_value) == 0
    if not isinstance(value, cst.Call):
        return False
    called = last_part(func_name(value) or "")
    if called == "tensor":
        return bool(value.args) and _empty(value.args[0].value)
    return called in ("list", "dict", "defaultdict", "zeros", "zeros_like")


_SHORT_RUN = 100


def _short_fixed_run(training: TrainingLoop) -> bool:
    """``for _ in range(5):`` or ``for _ in range(epochs)`` with ``def ...(epochs=20)``: a fixed run of a
    few steps (a test's mini training), so whatever it keeps stays bounded and small."""
    loop = training.loop
    if loop.parent is not None and loop.parent.is_loop:
        return False
    count = _run_length(loop)
    return count is not None and count <= _SHORT_RUN


def _run_length(loop: Loop) -> int | None:
    """How many iterations ``for _ in range(5):`` runs, or ``range(epochs)`` with ``def ...(epochs=20)``."""
    count = micro_count(loop)
    if isinstance(count, cst.Name) and loop.function is not None:
        params = loop.function.params
        defaults = {p.name.value: p.default for p in [*params.params, *params.kwonly_params] if p.default is not None}
        count = defaults.get(count.value)
    return int(count.evaluated_value) if isinstance(count, cst.Integer) else None


def _backpropagated_binding(reader: GraphReader, value: cst.BaseExpression, holder: object,
                            container: str | None = None) -> bool:
    """``value`` is the very loss handed to backward in this iteration: its backward freed the saved
    activations, and only the graph's small node objects stay with it. So is a running mean of it
    (``running_loss += (loss - running_loss) / step``: arithmetic on it, numbers and the container
    itself). Not a sum of the loss scaled by a number (``avg_cost += cost / total_batch``), which is
    reported by default: earlier reviews judged such epoch sums true where a user's run ran out of memory."""
    if type(value) is cst.BinaryOperation and container is not None:
        reads = graph_reads(value)
        if container not in reads:
            return False
        order, conds = holder.order, holder.conds  # type: ignore[attr-defined]
        read = {name: node for node in walk(value) if type(node) in (cst.Name, cst.Attribute)
                and (name := dotted(node)) in reads and name != container}
        graphs = [name for name, node in read.items() if reader.carries(node, order, conds) is True]
        return bool(graphs) and all(_backpropagated_name(reader, name, holder) for name in graphs)
    name = dotted(value)
    if name is None and type(value) is cst.Call and type(value.func) is cst.Attribute \
            and value.func.attr.value in ("mean", "sum") and not value.args:
        # `loss_reg.mean()` of a term the back-propagated loss was built from: its graph was freed too
        term = dotted(value.func.value)
        return term is not None and any(term in _terms_of(reader, a) for _, a in reader.backpropagated)
    return name is not None and _backpropagated_name(reader, name, holder)


def _backpropagated_name(reader: GraphReader, name: str, holder: object) -> bool:
    """``name``, where ``holder`` reads it, is bound to the loss handed to backward in this iteration."""
    if not reader.is_backpropagated(name):
        return False
    binding = reader.binding(name, holder.order, holder.conds)  # type: ignore[attr-defined]
    return any(n == name and a is binding for n, a in reader.backpropagated) \
        or binding is not None and reader.scaled_into_backward(name, binding)


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _terms_of(reader: GraphReader, binding: Assignment | None, depth: int = 0) -> set[str]:
    """The names a back-propagated loss is computed from in the iteration (``loss = loss_en + alpha *
    loss_reg``, then ``loss = loss.mean()``), through the loop's earlier bindings of them."""
    if binding is None or depth > 3:
        return set()
    # `loss.mean()` reads `loss` (names_in gives the dotted chain `loss.mean`)
    found = {prefix for name in names_in(binding.value) for prefix in _prefixes(name)}
    for name in list(found):
        found |= _terms_of(reader, reader.binding(name, binding.order, binding.conds), depth + 1)
    return found


def _reset_periodically(training: TrainingLoop, container: str) -> bool:
    """``if i % log_interval == 0: ...; total = 0`` in the loop: the total holds one logging window."""
    return any(container in a.names and a.op == "=" and _empty(a.value)
               and training.reader.guard(a.conds, a.order).periodic for a in training.loop.assignments)


def _reset_around_repeats(training: TrainingLoop, container: str) -> bool:
    """``loss_d_sum = 0.0`` in the batch loop, then ``for _ in range(rep_discriminator): ...;
    loss_d.backward(); ...; loss_d_sum += loss_d``: a repeat loop over a count, not over data, whose
    total is made empty again on every iteration of the loop around it, before it runs. It holds one
    batch's repeats, never more."""
    loop = training.loop
    if loop.parent is None or is_data_loop(loop) or not isinstance(loop.node, cst.For):
        return False
    if not loop.parent.is_loop and (count := _run_length(loop)) is not None and count > _SHORT_RUN:
        return False  # a function's own `for _ in range(max_iter):` with `max_iter=1000`: a whole optimisation
    if not isinstance(loop.node.iter, cst.Call) or func_name(loop.node.iter) != "range":
        return False
    return any(container in a.names and a.op == "=" and _empty(a.value) and a.order < loop.order
               and a.conds == loop.conds for a in loop.parent.assignments)


def _one_step_per_call(training: TrainingLoop, container: str) -> bool:
    """A loop of a function, not over a loader and with no optimizer step of its own, summing into a
    total the function binds before it on every call (GradCache's ``training_step``: ``grad_cache,
    total_loss = self.gc.build_cache(...)``, then ``for chunk in chunked_inputs: ... backward();
    total_loss += lm_loss``, stepped by the trainer that calls it): the total holds one step's pieces
    and is dropped when the call returns."""
    loop = training.loop
    scope = loop.parent
    if scope is None or scope.is_loop or scope.function is None or is_data_loop(loop):
        return False
    if loop.events(Kind.STEP, deep=True):
        return False
    return any(container in a.names and a.op == "=" and a.order < loop.order and a.conds == loop.conds
               for a in scope.assignments)


def _returned_to_backward(training: TrainingLoop, container: str, model: FileModel) -> bool:
    """A total the loop's function makes empty before the loop on every call and returns, where a
    caller in the file back-propagates what it returns there (a learned optimizer's unrolled
    meta-loss: ``self.total = 0``, ``self.total += loss`` per unroll step, ``return losses,
    self.total``, then ``_, meta_loss = learner(k); meta_loss.backward()``): the graph is kept so that
    backward can run through every step of the call, and it goes with the next call's reset."""
    loop, function = training.loop, training.loop.function
    scope = loop.parent
    if function is None or scope is None or scope.is_loop or scope.function is not function:
        return False
    if not any(container in a.names and a.op == "=" and _empty(a.value) and a.order < loop.order
               and loop.conds[:len(a.conds)] == a.conds for a in scope.assignments):
        return False
    positions = {_returned_position(value, container) for value in model.index.returns.get(function, [])} - {False}
    if not positions:
        return False
    for caller in [*model.scopes, *model.loops()]:
        for assignment in caller.assignments:
            value = assignment.value
            if assignment.op != "=" or not isinstance(value, cst.Call) or not _calls_it(value, function, model):
                continue
            # the caller's own backward of what it bound (not a same-named loss of another function)
            read = {n for b in caller.events(Kind.BACKWARD, deep=True)
                    if b.loss is not None and b.order > assignment.order for n in names_in(b.loss)}
            for name in assignment.names:
                if name in read and target_position(assignment.node, name) in positions:
                    return True
    return False


def _returned_position(value: cst.BaseExpression | None, container: str) -> int | None | bool:
    """Where ``container`` sits in a returned value: None for the whole value, its index in a
    returned tuple, False where it is not returned there."""
    if value is not None and dotted(value) == container:
        return None
    if isinstance(value, cst.Tuple):
        found = [i for i, e in enumerate(value.elements) if dotted(e.value) == container]
        if len(found) == 1:
            return found[0]
    return False


def _calls_it(call: cst.Call, function: cst.FunctionDef, model: FileModel) -> bool:
    """``call`` runs ``function``: by its name (``f(...)``; a method also as ``self.f(...)`` or
    ``obj.f(...)``), or for a ``__call__`` method, through a name bound to an instance of its class
    (``learner = Learner(...)`` then ``learner(k)``)."""
    called = dotted(call.func)
    if called is None:
        return False
    name = function.name.value
    owner = next((c for c in model.module.body if isinstance(c, cst.ClassDef)
                  and any(s is function for s in c.body.body)), None)  # type: ignore[union-attr]
    if name != "__call__":
        return called == name if owner is None else last_part(called) == name
    return owner is not None and any(isinstance(v, cst.Call) and last_part(func_name(v) or "") == owner.name.value
                                     for v in model.index.values.get(last_part(called), []))


def _made_anew_per_pass(training: TrainingLoop, container: str) -> bool:
    """``running_loss = 0.0`` (or ``[]``, or a new meter) right before the loop, every time it starts:
    in the loop around it (every epoch) or, where none is around it and the loop is one pass over a
    loader (an epoch function's), before it. What the container keeps is one pass's graphs, not the
    whole run's (a step-counted loop with the sum made once before it keeps them all)."""
    loop = training.loop
    outer = _around(loop)
    if outer is None or not outer.is_loop and not (is_data_loop(loop) or type(loop.node) is cst.For
                                                   and is_data_iterable(loop.node.iter)):
        return False
    return _made_before(outer, container, loop)


def _around(loop: Loop) -> Loop | None:
    """The loop around ``loop`` (a branch between them is no pass), or the outermost scope."""
    outer = loop.parent
    while outer is not None and not outer.is_loop and outer.parent is not None:
        outer = outer.parent
    return outer


def _made_before(outer: Loop, container: str, loop: Loop) -> bool:
    """``container = []`` (``0.0``, a new meter) in every iteration of ``outer``, before ``loop``."""
    return any(container in a.names and a.op == "=" and a.order < loop.order and not a.conds
               and (_empty(value := a.value_of(container) or a.value) or type(value) is cst.Call)
               for a in outer.assignments)


def _made_anew_per_item(training: TrainingLoop, container: str) -> bool:
    """``batches_loss_sum = torch.tensor(0.0)`` (or ``[]``) at the top of each iteration of a loop
    (``for batches in loader:``), before the training loop inside it goes over the pieces of that item
    (RADIO's ``for batch in batches:`` over one item's groups of one shape): what the container keeps
    is one item's, replaced at the next. Not an epoch loop's (``metrics = []`` per epoch, then a loop
    over the loader), whose passes keep a whole pass's graphs."""
    loop = training.loop
    outer = _around(loop)
    if outer is None or not outer.is_loop or type(outer.node) is not cst.For or type(loop.node) is not cst.For \
            or not set(names_in(loop.node.iter)) & set(target_names(outer.node.target)):
        return False  # the training loop goes over what the item is made of (`for batch in batches:`)
    return _made_before(outer, container, loop)


def _kept_past_pass(training: TrainingLoop, container: str) -> str | None:
    """The pass's sum, made anew before each pass, is itself kept after the pass by something made
    before the passes (``train_losses.append(running_loss / n)`` in the epoch loop, after the batch
    loop, with ``train_losses = []`` before the epochs): that keeps every pass's graph for the whole
    run."""
    loop = training.loop
    outer = loop.parent
    while outer is not None and not outer.is_loop:
        outer = outer.parent
    if outer is None:
        return None
    anew = {n for a in outer.assignments if a.op == "=" for n in a.names}
    stack: list[cst.CSTNode] = list(children(outer.node.body))
    while stack:
        node = stack.pop()
        kind = type(node)
        if node is loop.node or kind is cst.FunctionDef or kind is cst.Lambda:
            continue
        keeper, value = None, None
        if kind is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in ("append", "extend") \
                and node.args:
            keeper, value = dotted(node.func.value), node.args[0].value
        elif kind is cst.AugAssign:
            keeper, value = dotted(node.target), node.value
        elif kind is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Subscript:
            keeper, value = dotted(node.targets[0].target.value), node.value
        if keeper is not None and keeper != container and keeper not in anew and container in graph_reads(value):
            return keeper
        stack.extend(children(node))
    return None


def _made_fresh_to_fill(training: TrainingLoop, container: str, holder: object, model: FileModel) -> bool:
    """``show = []`` in the branch that then fills it from one iteration's tensors (``for k in
    range(preds.shape[1]): show.append(preds[:, k])`` under ``if step % show_every == 0:``): the list
    is rebuilt whenever it is filled and holds one iteration's values. A loop between the two that goes
    over data or runs the model (a validation helper's ``for x, y in val_loader: kept.append(model(x))``)
    still gathers a graph per batch into it."""
    conds, lifted = holder.conds, holder.lifted  # type: ignore[attr-defined]
    fresh = [a for a in training.loop.assignments
             if container in a.names and a.op == "=" and a.order < holder.order  # type: ignore[attr-defined]
             and conds[:len(a.conds)] == a.conds and lifted[:len(a.lifted)] == a.lifted]
    if not fresh:
        return False
    latest = max(fresh, key=lambda a: a.order)
    if not _empty(latest.value):
        return False
    between = lifted[len(latest.lifted):]
    if any(is_data_loop(loop) or isinstance(loop.node, cst.For) and is_data_iterable(loop.node.iter)
           for loop in between):
        return False
    modules = trained_modules(model) if between else set()
    return not any(isinstance(node, cst.Call) and module_name(func_name(node) or "") in modules
                   for loop in between for node in walk(loop.node.body))


def _made_empty_before(training: TrainingLoop, container: str, holder: object) -> bool:
    """``preds = []`` earlier in the same iteration, under no condition the store does not also run
    under (an evaluation pass every N steps that makes its list, then fills it in a loop over the
    chunks of one batch): whenever the store runs, the container was made empty in that iteration, so
    it holds nothing from an earlier one. Not where a loop over a loader runs in between, as written
    (`for x, y in val_loader:`): a validation pass that gathers every batch holds all their graphs."""
    conds = {id(c) for c in getattr(holder, "conds", ())}
    order = getattr(holder, "order", -1)
    lifted = getattr(holder, "lifted", ())
    return any(container in a.names and a.op == "=" and _empty(a.value) and a.order < order
               and {id(c) for c in a.conds} <= conds
               # not over a loader's batches in between: a validation pass gathering every batch's graph
               and not any(loop.order > a.order and (is_data_loop(loop) or isinstance(loop.node, cst.For)
                                                      and is_data_iterable(loop.node.iter)) for loop in lifted)
               for a in training.loop.assignments)


def _reset_every_iteration(training: TrainingLoop, container: str) -> bool:
    """``losses = []`` / ``total = 0`` on every iteration of the loop: nothing is kept across it."""
    for assignment in training.loop.assignments:
        if container in assignment.names and assignment.op == "=" and training.reader.guard(assignment.conds, assignment.order).always:
            value = assignment.value
            if not (isinstance(value, cst.BinaryOperation) and dotted(value.left) == container):
                return True
    return False
