"""Training loops: which loop runs backward, which steps consume it, and how accumulation works."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Event, Framework, Kind, Loop
from loopcheck.model.guards import Guard, GuardKind, GuardReader, either
from loopcheck.model.iterators import is_data_iterable, is_data_loop, iterated, taken_from
from loopcheck.model.syntax import dotted, func_name, int_value, last_part, method, names_in, positional, source, walk
from loopcheck.patterns import Pattern


class Style(enum.Enum):
    PLAIN = "one backward per step"
    GUARDED = "steps under an accumulation condition"  # if (i + 1) % N == 0: step
    MICRO_LOOP = "inner micro-step loop, step after it"  # for micro in range(N): backward; step
    ACCELERATE = "accelerator.accumulate()"
    FRAMEWORK = "an engine owns backward and step"  # DeepSpeed, Lightning, Fabric
    STEP_OUTSIDE = "step after a data loop"  # for batch in loader: backward; then step
    NO_STEP = "no optimizer step visible"
    UNKNOWN = "unrecognised"


@dataclass(eq=False)
class TrainingLoop:
    loop: Loop  # the loop whose iterations run backward
    backwards: list[Event]
    steps: list[Event]  # the optimizer steps those backward passes feed
    style: Style
    reader: GuardReader
    step_guard: Guard | None = None  # GUARDED: the condition the step runs under
    modulus: cst.BaseExpression | None = None  # N, where recognisable
    parent_reader: GuardReader | None = None
    notes: dict[str, object] = field(default_factory=dict)
    # The variant this is: the truth value assumed for each invariant flag (empty: the loop as written,
    # every branch present). A loop has one TrainingLoop per runnable variant; they share the syntax
    # nodes, so a finding in several variants is one finding.
    assumptions: dict[str, bool] = field(default_factory=dict)
    functions: Mapping[str, list[cst.FunctionDef]] = field(default_factory=dict)  # the file's, by name

    @property
    def accumulates(self) -> bool:
        return self.style in (Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE)

    @property
    def count_names(self) -> frozenset[str]:
        """The name the step test divides by (``N`` of ``(i + 1) % N == 0``, ``accum`` of ``args.accum``):
        an accumulation count by its use in the test, whatever it is called; a literal count as written
        (``8`` of ``if n == 8:``), which a horizon divided by that literal (``len(loader) / 8``) names."""
        if type(self.modulus) is cst.Integer:
            return frozenset({self.modulus.value})
        if self.modulus is None or not isinstance(self.modulus, (cst.Name, cst.Attribute)):
            return frozenset()
        name = dotted(self.modulus)
        return frozenset({last_part(name)}) if name else frozenset()

    @property
    def step_loop(self) -> Loop:
        return self.loop.parent if self.style in (Style.MICRO_LOOP, Style.STEP_OUTSIDE) and self.loop.parent \
            else self.loop

    def guard(self, event: Event, conds: tuple[Cond, ...] | None = None) -> Guard:
        """The guard of ``event`` (under ``conds`` instead of its own) relative to the loop it belongs to."""
        conds = event.conds if conds is None else conds
        if event.loop is self.loop:
            return self.reader.guard(conds, event.order)
        if event.loop is self.loop.parent and self.parent_reader is not None:
            return self.parent_reader.guard(conds, event.order)
        return GuardReader(event.loop, self.reader.int_inits).guard(conds, event.order) \
            if event.loop is not None else Guard(GuardKind.UNKNOWN)

    def events(self, *kinds: Kind) -> list[Event]:
        return self.loop.events(*kinds)

    def finite_guard(self, event: Event) -> Guard:
        """The guard of ``event`` on the micro-batches whose loss is finite and has a graph: a skip of
        a micro-batch whose loss is NaN or infinite (``if not _has_inf_or_nan(loss): backward(); clip();
        ...``) or does not require grad (``if loss.requires_grad: loss.backward()``) is an accident, not
        a schedule."""
        guard = self.guard(event)
        if guard.always:
            return guard
        usable = [_usable_side(self._named(c), self.functions) for c in event.conds]
        return self.guard(event, tuple(c for c, u in zip(event.conds, usable) if not u)) if any(usable) else guard

    def _named(self, cond: Cond) -> Cond:
        """``if not loss_nan:`` with ``loss_nan = torch.isnan(loss)`` bound once in the loop: the test it names."""
        test = cond.test
        inner = test.expression if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not else test  # type: ignore[union-attr]
        if type(inner) is not cst.Name:
            return cond
        bound = [a for a in self.loop.assignments if a.names == (inner.value,) and a.op == "="]  # type: ignore[union-attr]
        if len(bound) != 1 or type(bound[0].value) is not cst.Call:
            return cond
        value = bound[0].value if inner is test else cst.UnaryOperation(cst.Not(), bound[0].value)
        return replace(cond, test=value)

    def every_iteration(self, event: Event) -> bool:
        """``event`` runs on every micro-batch, itself or with a twin in the complementary branch of
        the boundary test (``if not boundary: with no_sync(): loss.backward()`` / ``else:
        loss.backward()``): one of the two runs on each iteration. A skip of a micro-batch whose loss
        is NaN or infinite (``if torch.isnan(loss).any(): ... else: loss.backward()``) is an accident,
        not a schedule: the branch for a finite loss runs on every micro-batch."""
        guard = self.finite_guard(event)
        if guard.always:
            return True
        if guard.kind not in (GuardKind.PERIODIC, GuardKind.NOT_PERIODIC, GuardKind.SYNC, GuardKind.NOT_SYNC) \
                or guard.partial:
            return False
        return any(other is not event and either(guard, self.guard(other)).always
                   for other in self.loop.events(event.kind))


# Tests of a value being finite (True) or NaN / infinite (False).
# Megatron's `DynamicLossScaler._has_inf_or_nan(x)` (copied into many fp16 code bases) is the last kind.
_FINITE_TESTS = {"isfinite": True, "isnan": False, "isinf": False, "isneginf": False, "isposinf": False,
                 "_has_inf_or_nan": False, "has_inf_or_nan": False}


_SKIPPED_WHEN_NONE = Pattern(r"batch|data|sample|input|loss", re.I)


def _usable_side(cond: Cond, functions: Mapping[str, list[cst.FunctionDef]]) -> bool:
    """``cond`` is the branch on which the loss can be back-propagated: it is finite, it requires
    grad (the body of ``if loss.requires_grad:``), or the batch or loss is there at all (past ``if
    batch is None: return``)."""
    test = cond.test
    if type(test) is cst.Attribute and test.attr.value == "requires_grad":
        return not cond.negated
    if type(test) is cst.Comparison and len(test.comparisons) == 1 \
            and type(test.comparisons[0].comparator) is cst.Name and test.comparisons[0].comparator.value == "None" \
            and _SKIPPED_WHEN_NONE.search(last_part(dotted(test.left) or "")):
        # `if batch is None: return` / `if loss is None: continue`: an empty micro-batch skipped
        return cond.negated is (type(test.comparisons[0].operator) is cst.Is)
    return _finite_side(cond, functions)


def _finite_side(cond: Cond, functions: Mapping[str, list[cst.FunctionDef]]) -> bool:
    """``cond`` is the branch on which a tested value is finite: the else of ``if torch.isnan(loss).any():``,
    the body of ``if torch.isfinite(loss):`` or of ``if is_valid_number(loss.item()):`` with a helper of
    the file that returns such a test."""
    finite = _holds_when_finite(cond.test, functions) if cond.test is not None else None
    return finite is not None and finite != cond.negated


def _holds_when_finite(test: cst.BaseExpression, functions: Mapping[str, list[cst.FunctionDef]],
                       depth: int = 0) -> bool | None:
    """Whether ``test`` holds when the value it tests is finite (True), when it is NaN or infinite
    (False), or is no such test (None). A bound on the same value beside such a test (``isnan(x) or
    x > 1e4``: a loss spike skipped too) keeps its meaning."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _holds_when_finite(test.expression, functions, depth)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):  # `isnan(x) or isinf(x)`, `isfinite(a) and isfinite(b)`
        left, right = _holds_when_finite(test.left, functions, depth), _holds_when_finite(test.right, functions, depth)
        if left is None and _bound(test.left, test.right):
            left = right
        if right is None and _bound(test.right, test.left):
            right = left
        return left if left is not None and left == right and left is isinstance(test.operator, cst.And) else None
    if isinstance(test, cst.Call):
        called = method(test)
        if called is not None and called[1] in ("any", "all") and not test.args:  # torch.isnan(loss).any()
            return _holds_when_finite(called[0], functions, depth)
        if isinstance(test.func, cst.Name) and depth == 0:
            returned = _returned(functions.get(test.func.value, []))
            if returned is not None:
                return _holds_when_finite(returned, functions, depth + 1)
        return _FINITE_TESTS.get(last_part(func_name(test) or ""))
    return None


def _bound(test: cst.BaseExpression, beside: cst.BaseExpression) -> bool:
    """``x > 1e4`` beside ``math.isnan(x)``: the value the other test reads, compared with a number."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    number = test.comparisons[0].comparator
    if isinstance(number, cst.UnaryOperation):
        number = number.expression
    value = dotted(test.left)
    return isinstance(number, (cst.Integer, cst.Float)) and value is not None and value in names_in(beside)


def _returned(defs: list[cst.FunctionDef]) -> cst.BaseExpression | None:
    """What the file's one function of a name returns, where its body is that single ``return``."""
    if len(defs) != 1 or not isinstance(defs[0].body, cst.IndentedBlock):
        return None
    body = [s for s in defs[0].body.body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                                 and isinstance(s.body[0], cst.Expr))]  # a docstring
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1 \
            or not isinstance(body[0].body[0], cst.Return):
        return None
    return body[0].body[0].value


def bound_to_data(name: str | None, values: Mapping[str, list[cst.BaseExpression]]) -> bool:
    """Every value the file assigns to the plain name ``name`` is a loader or dataset
    (``v = DataLoader(...)``, ``v = tqdm(train_loader)``, ``v = self.train_loader``): ``values`` is
    the file's (``Index.values``)."""
    bound = values.get(name, []) if name and "." not in name else []
    return bool(bound) and all(is_data_iterable(v) for v in bound)


def _splits_the_batch(loop: Loop, parent: Loop) -> bool:
    """``for chunk_x, chunk_y in zip(*split(data, targets)):`` inside ``for data, targets in loader:``:
    the inner loop goes over pieces of the outer loop's batch (a subdivided batch, one step per
    loader batch), not over the data; only names bound to the batch make it look like a data loop."""
    if not parent.is_loop or not is_data_loop(parent) or parent.target is None or is_data_iterable(loop.node.iter):
        return False
    batch = {n.split(".", 1)[0] for n in names_in(parent.target)}
    iterated = {n.split(".", 1)[0] for n in names_in(loop.node.iter)}
    bound = [a for a in parent.assignments if a.op != "for" and a.order < loop.order and set(a.names) & iterated]
    return bool(bound) and all({n.split(".", 1)[0] for n in names_in(a.value)} & batch for a in bound)


def zeroed_for_the_step(loop: Loop, reader: GuardReader, backward: Event) -> bool:
    """The branch of a periodic test that back-propagates zeroes the gradients first
    (``if step % policy_update_period == 0: opt.zero_grad(); loss.backward(); opt.step()``): an
    update every N iterations (an RL update period) that keeps nothing of the iterations between
    them, whose losses are computed for their statistics, not a window of micro-batches."""
    if not reader.guard(backward.conds, backward.order).periodic:
        return False
    branch = _branch(backward.conds)
    stepped = {s.receiver for s in loop.events(Kind.STEP) if _branch(s.conds) == branch}
    return any(z.order < backward.order and _branch(z.conds) == branch and (z.target != "optimizer" or z.receiver in stepped)
               for z in loop.events(Kind.ZERO_GRAD))


def _branch(conds: tuple[Cond, ...]) -> list[tuple[int, str, bool]]:
    return [(id(c.owner), c.branch, c.negated) for c in conds]


def _fed_afresh(parent: Loop, loop: Loop, step: Event) -> bool:
    """Between ``loop`` and ``step``, wherever the step runs, the gradients are zeroed (its optimizer's
    or the model's) and then a backward of ``parent``'s own runs: the step is fed by that backward
    and the loop's gradients are wiped before it (MAML's per-task ``loss.backward()``, then
    ``optimiser.zero_grad(); meta_loss.backward(); optimiser.step()``), so the loop is no window of it.
    So is a loop whose every iteration ends by clearing them (a warmup before the timed step)."""
    def on_path(event: Event) -> bool:  # runs wherever the step does
        branch = _branch(event.conds)
        return _branch(step.conds)[:len(branch)] == branch

    stepped = step.optimizer or step.receiver
    zeros = [z.order for z in parent.events(Kind.ZERO_GRAD) if loop.order < z.order < step.order and on_path(z)
             and (z.target != "optimizer" or z.receiver == stepped)]
    # a loop that clears after its own last backward on every iteration (a timing warmup: forward,
    # backward, `model.zero_grad()`) leaves no gradient behind: the zeroing is as good as after it
    backwards = loop.events(Kind.BACKWARD)
    last = max(b.order for b in backwards) if backwards else None
    if last is not None and any(z.order > last and not z.conds and (z.target != "optimizer" or z.receiver == stepped)
                                for z in loop.events(Kind.ZERO_GRAD)):
        zeros.append(loop.order)
    return bool(zeros) and any(min(zeros) < b.order < step.order and on_path(b) for b in parent.events(Kind.BACKWARD))


def draws_batches(loop: Loop) -> bool:
    """Each micro-step of ``loop`` takes a new batch from an iterator over the data (``inputs, labels =
    next(dataloader_iter)`` with ``dataloader_iter = iter(train_dataloader)``): its micro-steps are
    micro-batches of the loader, not pieces of the outer loop's batch, whatever that outer loop
    counts (``for i in range(len(train_dataloader) // N):`` counts windows)."""
    for assignment in loop.assignments:
        taken = taken_from(assignment.value) if assignment.op == "=" and type(assignment.value) is cst.Call else None
        if taken is not None and _iterates_data(taken, loop):
            return True
    return False


def _iterates_data(iterator: cst.BaseExpression, loop: Loop) -> bool:
    """``iterator`` goes over a loader: by its name (``data_iter``, ``self.dataloader``), or bound to
    ``iter(<loader>)`` in a loop around ``loop`` (or the function holding them)."""
    if is_data_iterable(iterator):
        return True
    name = dotted(iterator)
    scope = loop.parent
    while name is not None and scope is not None:
        for assignment in scope.assignments:
            if assignment.op == "=" and name in assignment.names and assignment.names == (name,):
                over = iterated(assignment.value)
                if over is not None and is_data_iterable(over):
                    return True
        scope = scope.parent
    return False


_SPLITS = ("split", "chunk")


def over_modules(loop: Loop) -> bool:
    """``loop`` goes over networks, calling each on the same input (FairNAS's ``for _model in
    op_sampler(model): _loss = criterion(_model(input), target); _loss.backward()``, an ensemble's
    members): its backward passes sum the losses of one batch, not micro-batches."""
    node = loop.node
    if not loop.is_loop or type(node) is not cst.For or type(node.target) is not cst.Name:
        return False
    target = node.target.value
    return any(type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == target  # type: ignore[attr-defined]
               for n in walk(node.body))


def slices_of_a_batch(loop: Loop) -> str | None:
    """How many slices of one batch the loop goes over, as text (``ceil(batch_size / microbatch)``),
    where it visibly goes over slices: ``for i in range(0, B, mb):`` with ``x[i : i + mb]`` in its
    body (guided-diffusion's ``forward_backward``), or ``for micro in torch.split(x, mb)`` /
    ``x.chunk(k)`` (zipped or not). None for any other loop."""
    node = loop.node
    it = getattr(node, "iter", None) if loop.is_loop else None
    if it is None:
        return None
    if isinstance(it, cst.Call) and func_name(it) == "range":
        args = positional(it)
        target = dotted(node.target) if isinstance(node, cst.For) else None
        if len(args) != 3 or int_value(args[0]) != 0 or target is None:
            return None
        step = source(args[2])
        for sub in walk(node.body):
            if isinstance(sub, cst.Slice) and sub.lower is not None and dotted(sub.lower) == target \
                    and isinstance(sub.upper, cst.BinaryOperation) and isinstance(sub.upper.operator, cst.Add) \
                    and dotted(sub.upper.left) == target and source(sub.upper.right) == step:
                return f"ceil({source(args[1])} / {step})"
        return None
    if isinstance(it, cst.Call) and func_name(it) == "zip":
        # `zip(torch.split(x, mb), torch.split(y, mb))`: the pieces of one batch's fields, as many of each
        found = [slices_of_a_batch_call(a) for a in positional(it)]
        return found[0] if found and all(f is not None for f in found) else None
    return slices_of_a_batch_call(it)


def slices_of_a_batch_call(expr: cst.BaseExpression) -> str | None:
    """``torch.split(x, mb)``, ``x.split(mb)`` (``ceil(len(x) / mb)`` slices), ``torch.chunk(x, k)``,
    ``x.chunk(k)`` (``k`` slices)."""
    if not isinstance(expr, cst.Call):
        return None
    args = positional(expr)
    called = method(expr)
    name = last_part(func_name(expr) or "")
    if name not in _SPLITS:
        return None
    if called is not None and dotted(called[0]) not in ("torch",) and len(args) == 1:
        tensor, size = called[0], args[0]
    elif len(args) == 2 and (func_name(expr) or "").startswith("torch."):
        tensor, size = args
    else:
        return None
    if isinstance(size, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return None  # `line.split(",")`: words, not slices of a tensor
    if name == "chunk":
        return source(size)
    return f"ceil(len({source(tensor)}) / {source(size)})" if name == "split" else None


# `utils.partition_inputs(batch, accumu_steps)`, `split_batch(batch, n)`: a helper cutting one batch up
_PIECES_HELPER = Pattern(r"partition|split|chunk|shard", re.I)


def pieces_of_one_batch(loop: Loop, backwards: list[Event]) -> bool:
    """The loop goes over pieces of one batch made before it (Nystromformer): a list the function fills
    by item from a loop over ``torch.chunk(batch[key], k)`` (``partial_inputs_list[idx][key] = inp``), or
    what a helper named for cutting returns (``for percent, inputs in partition_inputs(batch, k, True)``)."""
    it = getattr(loop.node, "iter", None)
    if type(it) is cst.Call and _PIECES_HELPER.search(last_part(func_name(it) or "")) and len(positional(it)) >= 2 \
            and not is_data_iterable(positional(it)[0]):
        return True  # (a helper handed the loader itself, `shard_loader(loader, rank)`, goes over the data)
    # the function that holds the loop: a helper's own where the loop was inlined from one
    scope = loop.function or next((b.origin for b in backwards if b.origin is not None), None) \
        or (loop.parent.node if loop.parent is not None else None)
    if type(it) is not cst.Name or scope is None:
        return False
    for node in walk(scope):
        if type(node) is not cst.For or node is loop.node:
            continue
        pieces = node.iter
        if type(pieces) is cst.Call and func_name(pieces) == "enumerate" and positional(pieces):
            pieces = positional(pieces)[0]
        if slices_of_a_batch_call(pieces) is not None and any(
                type(sub) is cst.Assign and any(_item_of(t.target, it.value) for t in sub.targets)
                for sub in walk(node.body)):
            return True
    return False


def _item_of(target: cst.BaseExpression, name: str) -> bool:
    """``name[i]``, ``name[i][key]``: an item stored into ``name``."""
    if type(target) is not cst.Subscript:
        return False
    while type(target) is cst.Subscript:
        target = target.value  # type: ignore[attr-defined]
    return dotted(target) == name


def micro_count(loop: Loop) -> cst.BaseExpression | None:
    """N of ``for micro_step in range(N)``."""
    it = loop.iter
    if isinstance(it, cst.Call) and last_part(func_name(it) or "") == "range":
        args = positional(it)
        if len(args) == 1:
            return args[0]
    return None


def _computed_for_the_step(loop: Loop, reader: GuardReader, backward: Event, step_guard: Guard) -> bool:
    """The backward pass and the loss it back-propagates both run only under the step's periodic
    test (the same test node). A loss computed on every iteration and back-propagated only in the
    step branch is still a window whose other losses are thrown away (LC113)."""
    def under(conds: tuple[Cond, ...], order: int) -> bool:
        guard = reader.guard(conds, order)
        return guard.kind is step_guard.kind and guard.test is not None and guard.test is step_guard.test

    name = dotted(backward.loss) if backward.loss is not None else None
    assigned = [a for a in loop.assignments_before(name, backward.order) if a.op == "="] if name else []
    return under(backward.conds, backward.order) and bool(assigned) and under(assigned[-1].conds, assigned[-1].order)


def is_manual_backward(backward: Event) -> bool:
    """``self.manual_backward(loss)`` of a LightningModule under manual optimization."""
    return backward.framework is Framework.LIGHTNING and isinstance(backward.node, cst.Call) \
        and last_part(func_name(backward.node) or "") == "manual_backward"


def manual_optimization(backwards: list[Event], steps: list[Event]) -> bool:
    """A LightningModule that steps its optimizers itself (``automatic_optimization = False``):
    ``manual_backward`` is a plain backward (plus the precision plugin's loss scaling), and zeroing,
    stepping and any accumulation are the module's own code, which Lightning leaves as written.
    So is Lightning Fabric's ``fabric.backward(loss)`` (steps in the loop or around it): it neither
    steps, zeroes nor divides, and a loop that calls it zeroes, steps and accumulates by its own code."""
    lightning = [b for b in backwards if b.framework is Framework.LIGHTNING]
    if all(is_fabric_backward(b) for b in lightning):
        return True
    return bool(steps) and all(is_manual_backward(b) or is_fabric_backward(b) for b in lightning)


def analyse(loop: Loop, int_inits: dict[str, set[int | None]]) -> TrainingLoop | None:
    backwards = loop.events(Kind.BACKWARD)
    if not backwards:
        return None
    reader = GuardReader(loop, int_inits)
    parent = loop.parent
    parent_reader = GuardReader(parent, int_inits) if parent is not None else None
    steps = [e for e in loop.events(Kind.STEP)]
    frameworks = {b.framework for b in backwards}

    def make(style: Style, steps: list[Event], **kw: object) -> TrainingLoop:
        return TrainingLoop(loop, backwards, steps, style, reader, parent_reader=parent_reader,  # type: ignore[arg-type]
                            assumptions=loop.assumptions, **kw)

    if Framework.ENGINE in frameworks or Framework.LIGHTNING in frameworks and not manual_optimization(backwards, steps):
        return make(Style.FRAMEWORK, steps)
    return _styled(loop, backwards, steps, reader, make)


def is_fabric_backward(backward: Event) -> bool:
    """``fabric.backward(loss)`` (Lightning Fabric; ``self.manual_backward`` is a LightningModule's)."""
    return backward.framework is Framework.LIGHTNING and isinstance(backward.node, cst.Call) \
        and last_part(func_name(backward.node) or "") == "backward"


def _styled(loop: Loop, backwards: list[Event], steps: list[Event], reader: GuardReader,
            make: Callable[..., TrainingLoop]) -> TrainingLoop:
    """The loop's style read from where its steps run, for backward passes nobody else steps."""
    parent = loop.parent
    if any(b.in_context("accumulate") for b in backwards):
        return make(Style.ACCELERATE, steps)
    if steps:
        guards = [reader.guard(s.conds, s.order) for s in steps]
        steps = [s for s, g in zip(steps, guards) if not g.never]
        guards = [g for g in guards if not g.never]
    if steps:
        periodic = [g for g in guards if g.periodic]
        if periodic and all(g.periodic or g.kind is GuardKind.LAST for g in guards):
            if all(_computed_for_the_step(loop, reader, b, periodic[0]) or zeroed_for_the_step(loop, reader, b)
                   for b in backwards):
                # `if step % train_frequency == 0: loss = ...; backward(); step()`: an update every N
                # iterations from a loss computed for it; nothing is accumulated between them
                return make(Style.PLAIN, steps)
            return make(Style.GUARDED, steps, step_guard=periodic[0], modulus=periodic[0].modulus)
        if all(g.always for g in guards):
            return make(Style.PLAIN, steps)
        return make(Style.UNKNOWN, steps)
    if parent is not None:
        after = [e for e in parent.events(Kind.STEP) if e.order > loop.order and not _fed_afresh(parent, loop, e)]
        if after:
            if is_data_loop(loop) and not _splits_the_batch(loop, parent) and slices_of_a_batch(loop) is None \
                    and not pieces_of_one_batch(loop, backwards):
                return make(Style.STEP_OUTSIDE, after)
            return make(Style.MICRO_LOOP, after, modulus=micro_count(loop))
    return make(Style.NO_STEP, [])


def one_micro_batch_loss(training: TrainingLoop, backward: Event) -> bool:
    """The loss back-propagated is one micro-batch's: ``loss = ...`` set anew on every micro-batch, not
    ``total = total + ...`` (a scaling of it after, ``loss /= N`` or ``loss = loss / k``, keeps it one
    micro-batch's)."""
    name = dotted(backward.loss) if backward.loss is not None else None
    if name is None:
        return False
    before = [a for a in training.loop.assignments_before(name, backward.order)
              if a.op not in ("DivideAssign", "MultiplyAssign") and not _scales_itself(name, a)]
    # under a flag only (`if cfg.amp: loss = ...` / `else: loss = ...`): still every micro-batch
    # under the conditions the backward itself sits in (`if predictions.shape[0] != 0:` around both the loss
    # and the step test): on every micro-batch that reaches the test
    conds = before[-1].conds if before else ()
    if not before or before[-1].op != "=" or name in names_in(before[-1].value):
        return False
    if not conds:
        return True
    guard = training.reader.guard(conds, before[-1].order)
    # (a loss computed only under a periodic test of its own, a probe every K steps, is no micro-batch's)
    return guard.always or backward.conds[:len(conds)] == conds and guard.kind not in (
        GuardKind.PERIODIC, GuardKind.NOT_PERIODIC, GuardKind.SYNC, GuardKind.NOT_SYNC, GuardKind.LAST)


def _scales_itself(name: str, assignment: Assignment) -> bool:
    """``loss = loss / k``, ``loss = loss * w``: the same micro-batch's loss rescaled, as ``loss /= k`` is."""
    value = assignment.value
    return assignment.op == "=" and isinstance(value, cst.BinaryOperation) \
        and isinstance(value.operator, (cst.Divide, cst.Multiply)) and dotted(value.left) == name \
        and name not in names_in(value.right)
