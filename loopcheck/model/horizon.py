"""In what unit a scheduler's horizon (``T_max``, ``total_steps``, ``num_training_steps``) is counted.

Read only from what the file shows: ``len(train_loader) * epochs`` counts batches (micro-batches
under accumulation), ``... // gradient_accumulation_steps`` counts optimizer steps, ``args.epochs``
alone counts epochs. Names assigned once in the file are followed a few levels deep.
"""

from __future__ import annotations

import enum
import re

import libcst as cst

from loopcheck.model.index import Index
from loopcheck.model.syntax import children, dotted, func_name, keyword, last_part, names_in, param_names, positional, walk
from loopcheck.model.training import bound_to_data
from loopcheck.patterns import Pattern


class Unit(enum.Enum):
    BATCHES = "batches"  # one per data-loader batch: micro-batches under accumulation
    UPDATES = "optimizer steps"
    EPOCHS = "epochs"


# Horizon argument of each scheduler constructor: (keyword, position among all arguments).
_HORIZON_ARGS = {
    "CosineAnnealingLR": ("T_max", 1), "OneCycleLR": ("total_steps", 2), "LinearLR": ("total_iters", 3),
    "PolynomialLR": ("total_iters", 1), "CosineAnnealingWarmRestarts": ("T_0", 1),
    "get_linear_schedule_with_warmup": ("num_training_steps", 2),
    "get_cosine_schedule_with_warmup": ("num_training_steps", 2),
    "get_polynomial_decay_schedule_with_warmup": ("num_training_steps", 2),
    "get_constant_schedule_with_warmup": (None, None), "get_scheduler": ("num_training_steps", 3),
}
# Names of accumulation counts (`gradient_accumulation_steps`, `accum_iter`, `grad_acc`).
ACCUMULATION_NAME = Pattern(r"accum|gradient_accumulation|grad_acc|(^|_)acc_(steps|iters?)$", re.I)
# `epoch_length` is the number of batches in an epoch, not a number of epochs
_BATCHES = Pattern(r"per_epoch|num_batches|len_loader|epoch_len|epoch_size|epoch_iters", re.I)
_UPDATES = Pattern(r"update_steps|updates_per_epoch|num_update", re.I)
_EPOCHS = Pattern(r"epoch", re.I)
# the data a `len()` counts: a loader or a dataset, also a list of examples (`len(train_examples)
# / args.train_batch_size`, as BERT-era scripts count their batches)
_DATA = Pattern(r"load|(^|_)dl($|_)|dataset|(^|train_)(data|examples|features|samples)$", re.I)


# Warmup length of the schedules that take one: (keyword, position among all arguments).
_WARMUP_ARGS = {
    "get_linear_schedule_with_warmup": ("num_warmup_steps", 1),
    "get_cosine_schedule_with_warmup": ("num_warmup_steps", 1),
    "get_polynomial_decay_schedule_with_warmup": ("num_warmup_steps", 1),
    "get_constant_schedule_with_warmup": ("num_warmup_steps", 1), "get_scheduler": ("num_warmup_steps", 2),
}


# Keywords that name the length or the warmup of a scheduler class outside the tables above:
# pytorch-transformers 1.x `WarmupLinearSchedule(optimizer, warmup_steps=..., t_total=...)`, a project's
# own `WarmupCosineLR(optimizer, warmup_iters=..., max_iters=...)`. A keyword says what its value is;
# a position does not (copies of one class name take their arguments in different orders).
_HORIZON_KEYWORDS = ("t_total", "T_max", "total_steps", "num_training_steps", "total_iters", "max_iters",
                     "scheduler_steps")
_WARMUP_KEYWORDS = ("num_warmup_steps", "warmup_steps", "warmup_iters")


# Where a step schedule decays: `StepLR(optimizer, step_size)` every `step_size` scheduler steps,
# `MultiStepLR(optimizer, milestones)` at each milestone; where `SequentialLR(optimizer, schedulers,
# milestones)` hands over to its next schedule (a warmup's end); how many steps `CyclicLR(optimizer,
# base_lr, max_lr, step_size_up)` climbs for. Read by LC303 only: a literal step size
# is no length a per-micro-batch step (LC301) cuts short.
_DECAY_ARGS = {"StepLR": ("step_size", 1), "MultiStepLR": ("milestones", 1), "SequentialLR": ("milestones", 2),
               "CyclicLR": ("step_size_up", 3)}
# Casts around one milestone (`int(args.epochs * 0.75)`) that keep its unit.
_CASTS = ("int", "round", "ceil", "floor")
# Calls whose value counts what their arguments count (`max(1, args.epochs - args.warmup_epochs)`)
_SAME_UNIT_CALLS = frozenset({*_CASTS, "max", "min", "abs", "float"})


def decay_expr(call: cst.Call) -> cst.BaseExpression | None:
    """The step size of ``StepLR`` or the milestones of ``MultiStepLR`` and ``SequentialLR``: when the
    schedule decays or moves on to its next part."""
    spec = _DECAY_ARGS.get(last_part(func_name(call) or ""))
    if spec is None:
        return None
    key, pos = spec
    value = keyword(call, key)
    args = positional(call)
    value = value if value is not None else args[pos] if len(args) > pos else None
    return _uncast(value) if value is not None else None


def _class_keyword(call: cst.Call, name: str, keys: tuple[str, ...]) -> cst.BaseExpression | None:
    """The value of the first of ``keys`` given to a class constructor (``CamelCase``; a factory
    function's keyword may mean anything its body makes of it)."""
    if not name[:1].isupper():
        return None
    return next((value for key in keys if (value := keyword(call, key)) is not None), None)


def warmup_expr(call: cst.Call) -> cst.BaseExpression | None:
    """The expression that sets a schedule's warmup length (``num_warmup_steps``), where it has one."""
    name = last_part(func_name(call) or "")
    spec = _WARMUP_ARGS.get(name)
    if spec is None:
        return _class_keyword(call, name, _WARMUP_KEYWORDS) if name not in _HORIZON_ARGS else None
    key, pos = spec
    value = keyword(call, key)
    args = positional(call)
    return value if value is not None else args[pos] if len(args) > pos else None


def horizon_expr(call: cst.Call, index: Index) -> cst.CSTNode | None:
    """The expression (or, for ``LambdaLR``, the function body) that sets the schedule's length."""
    name = last_part(func_name(call) or "")
    if name in ("LambdaLR", "MultiplicativeLR"):
        args = positional(call)
        fn = args[1] if len(args) > 1 else keyword(call, "lr_lambda")
        given = _given_lengths(fn)
        if given is not None:
            return given
        defs = index.functions.get(fn.value, []) if isinstance(fn, cst.Name) else []
        found = fn if isinstance(fn, cst.Lambda) else defs[0] if len(defs) == 1 else None
        body = _beyond_parameters(found.body, found.params) if found is not None else None
        if body is not None and unit_of(body, index) is None:
            # read whole, the body says no unit: the lengths it divides the step count by may
            lengths = _lengths(body, found.params)  # type: ignore[union-attr]
            if lengths is not None:
                return lengths  # (whose unit may still be the loop's: `(step - warmup) / (max_steps - warmup)`)
        return body
    if name == "SequentialLR":
        return _last_schedule_horizon(call, index)
    if name == "OneCycleLR" and keyword(call, "total_steps") is None:
        epochs, per_epoch = keyword(call, "epochs"), keyword(call, "steps_per_epoch")
        if epochs is not None and per_epoch is not None:
            return cst.BinaryOperation(epochs, cst.Multiply(), per_epoch)
        return None
    spec = _HORIZON_ARGS.get(name)
    if spec is None:
        return _class_keyword(call, name, _HORIZON_KEYWORDS)
    if spec[0] is None:
        return None
    key, pos = spec
    value = keyword(call, key)
    args = positional(call)
    if value is None and pos is not None and len(args) > pos:
        value = args[pos]
    return value


def _last_schedule_horizon(call: cst.Call, index: Index) -> cst.CSTNode | None:
    """The horizon of the last schedule ``SequentialLR(optimizer, schedulers, milestones)`` hands over
    to, which runs to the end (the cosine after a warmup: ``[LinearLR(optimizer, total_iters=warmup),
    CosineAnnealingLR(optimizer, T_max=decay_steps)]``), written there or bound once to its name."""
    args = positional(call)
    schedules = keyword(call, "schedulers")
    schedules = schedules if schedules is not None else args[1] if len(args) > 1 else None
    if not isinstance(schedules, (cst.List, cst.Tuple)) or not schedules.elements:
        return None
    last = schedules.elements[-1].value
    if isinstance(last, cst.Name):
        bound = index.values.get(last.value, [])
        last = bound[0] if len(bound) == 1 else last
    return horizon_expr(last, index) if isinstance(last, cst.Call) else None


def unit_of(expr: cst.CSTNode, index: Index, depth: int = 0, seen: frozenset[str] = frozenset(),
            counts: frozenset[str] = frozenset()) -> Unit | None:
    """The unit ``expr`` counts in, or None where the file does not make it certain (``seen``: the
    names whose values are being read, outside in; ``counts``: the names the loop's step test uses as
    its accumulation count, whatever they are called: ``N`` of ``(i + 1) % N == 0``)."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        # milestones: each counts in the same unit, or the list has none
        units = {unit_of(_uncast(e.value), index, depth, seen, counts) if isinstance(e, cst.Element) else None
                 for e in expr.elements}
        return units.pop() if len(units) == 1 else None
    per_process = times_processes(expr)
    if per_process is not None:
        # `max_train_steps * accelerator.num_processes`: Accelerate's count for a prepared scheduler, which
        # steps once per process on every optimizer step; per process it counts what the other factor counts
        return unit_of(per_process, index, depth, seen, counts)
    scaled = times_accumulation(expr, counts)
    if scaled is not None:
        # a count times the accumulation count is micro-batches (`max_train_steps * grad_accum`): the
        # factor counts optimizer steps, whether or not the file shows where it comes from
        return Unit.BATCHES if unit_of(scaled, index, depth, seen, counts) in (Unit.UPDATES, None) else None
    found: set[Unit] = set()
    divided_by_accum = ambiguous = False
    over_data = _comprehended_data(expr, index)
    for node in walk(expr):
        kind = type(node)  # exact types: isinstance() on libcst's ABCs is slow
        if kind is cst.BinaryOperation and type(node.operator) in (cst.Divide, cst.FloorDivide):
            if _counts_data(node.right, index):
                # `args.iters / len(train_dataloader)`: iterations over the batches of an epoch are epochs,
                # or whatever the numerator makes of them; no batches
                return None
            carried = _carries_accumulation(node.right, index, counts)
            divided_by_accum = divided_by_accum or carried is True
            ambiguous = ambiguous or carried is None
        if kind is cst.Call and func_name(node) == "len" and _counts_data(node, index, over_data):
            found.add(Unit.BATCHES)
    epoch_counts = 0
    names = keyed_names(expr)
    for name in names:
        short = last_part(name)
        # what the file assigns outweighs the name: `num_update_steps_per_epoch = len(train_dataloader)`
        # counts batches whatever it is called
        if depth < 3 and (sub := _assigned_unit(name, index, depth, seen, counts)) is not None:
            if sub is Unit.EPOCHS:
                epoch_counts += 1  # a number of epochs, however it is named: `n_epochs = args.epochs`
            else:
                found.add(sub)
        elif _UPDATES.search(short):
            found.add(Unit.UPDATES)
        elif _BATCHES.search(short):
            found.add(Unit.BATCHES)
        elif _EPOCHS.search(short):
            epoch_counts += 1
    if ambiguous and not divided_by_accum:
        return None
    if divided_by_accum and Unit.BATCHES in found:
        found.discard(Unit.BATCHES)
        found.add(Unit.UPDATES)
    # epochs alone count epochs; epochs times something else (`epochs * len(loader)`, `full_len / stride
    # * epochs / batch_size`) count whatever that is
    if not found and names and epoch_counts == len(names):
        return Unit.EPOCHS
    if len(found) == 1:
        return found.pop()
    return None


def _comprehended_data(expr: cst.CSTNode, index: Index) -> set[str]:
    """The names a comprehension binds over the data (``d`` of ``sum(len(d) for d in train_loaders)``):
    ``len(d)`` counts batches as ``len(train_loader)`` does."""
    return {n for node in walk(expr) if type(node) is cst.CompFor for n in names_in(node.target)
            if any(_DATA.search(last_part(m)) or bound_to_data(m, index.values) for m in names_in(node.iter))}


def _counts_data(expr: cst.BaseExpression, index: Index, over_data: set[str] | None = None) -> bool:
    """``len(train_loader)``, ``len(dataset)``: a count of the data, whole or as a divisor's factor;
    by its name, or by what the file binds the name to (``dl = DataLoader(...)``; ``len(dl)``)."""
    over_data = over_data or set()
    for node in walk(expr):
        if isinstance(node, cst.Call) and func_name(node) == "len":
            args = positional(node)
            if args and any(_DATA.search(last_part(n)) or bound_to_data(n, index.values) or n in over_data
                            for n in names_in(args[0])):
                return True
    return False


def is_accumulation_count(name: str, counts: frozenset[str] = frozenset()) -> bool:
    """``name`` names an accumulation count: by what it is called (``grad_accum``), or because the loop's
    step test uses it as the count (``counts``)."""
    return bool(ACCUMULATION_NAME.search(name)) or last_part(name) in counts


def _carries_accumulation(divisor: cst.BaseExpression, index: Index,
                          counts: frozenset[str] = frozenset(), depth: int = 0) -> bool | None:
    """Whether a divisor includes the accumulation count: by name (``// gradient_accumulation_steps``)
    or through what the file assigns to a name in it, a few assignments deep (``batch_size = per_gpu *
    gradient_accumulation_steps * world_size``, or ``train_batch_size = per_node_train_batch_size *
    world_size`` with ``per_node_train_batch_size`` so built; then ``len(dataset) // batch_size`` counts
    optimizer steps), or is the loop's literal count (``len(loader) / 8`` stepped at ``if n == 8:``). None
    where some of the name's values carry it and others do not."""
    if type(divisor) is cst.Integer and divisor.value in counts:
        return True
    names = keyed_names(divisor)
    if any(is_accumulation_count(n, counts) for n in names):
        return True
    verdict: bool | None = False
    for name in names:
        values = index.values.get(last_part(name), [])
        carried = [any(is_accumulation_count(n, counts) for n in names_in(v))
                   or depth < 2 and isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Multiply)
                   and _carries_accumulation(v, index, counts, depth + 1) is True for v in values]
        if carried and all(carried):
            return True
        if any(carried):
            verdict = None
    return verdict


def _assigned_unit(name: str, index: Index, depth: int, seen: frozenset[str],
                   counts: frozenset[str] = frozenset()) -> Unit | None:
    """The unit every value the file assigns to ``name`` agrees on (``args.max_train_steps = epochs *
    num_update_steps_per_epoch``, assigned once per branch; a name set alike in two functions). A
    setting taken as given in another branch (``total_train_steps = int(training_args.max_steps)``
    where ``max_steps > 0``) says no unit and leaves the count the file works out to decide: that
    count is what the other branch, the one taken by default, hands the scheduler."""
    short = last_part(name)
    values = index.values.get(short, [])
    inner = seen | {short}
    units = [unit_of(v, index, depth + 1, inner, counts) for v in values]
    if len(set(units)) == 1:
        return units[0]
    # a value copied back from an outer name being read (``steps_per_epoch = total_train_steps`` in the
    # branch that sets the total) says nothing about the other branches either; a copy of the name
    # itself (``self.num_train_steps = num_train_steps``, a parameter handed over) is a value of its own
    computed = {u for u, v in zip(units, values)
                if not (u is None and _given_setting(v)) and not (names_in(v) and any(
                    last_part(n) in seen and last_part(n) != short for n in names_in(v)))}
    return computed.pop() if len(computed) == 1 and None not in computed else None


def _given_setting(value: cst.BaseExpression) -> bool:
    """``args.max_steps``, ``int(training_args.max_steps)``, ``config["total_steps"]``: a number read
    from the configuration as it is, with nothing worked out from it."""
    value = _uncast(value)
    return isinstance(value, (cst.Attribute, cst.Subscript)) and not any(
        isinstance(n, (cst.Call, cst.BinaryOperation)) for n in walk(value))


def times_processes(expr: cst.CSTNode) -> cst.BaseExpression | None:
    """The other factor of ``x * accelerator.num_processes`` (either order; any object's
    ``num_processes`` attribute: ``self.accelerator.num_processes``, ``AcceleratorState().num_processes``),
    or None."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Multiply):
        return None
    for count, other in ((expr.right, expr.left), (expr.left, expr.right)):
        if isinstance(count, cst.Attribute) and count.attr.value == "num_processes":
            return other
    return None


def times_accumulation(expr: cst.CSTNode, counts: frozenset[str] = frozenset()) -> cst.BaseExpression | None:
    """The other factor of ``x * accumulation_count`` (either order), or None."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Multiply):
        return None
    for count, other in ((expr.right, expr.left), (expr.left, expr.right)):
        names = keyed_names(count)
        if names and all(is_accumulation_count(last_part(n), counts) for n in names):
            return other
    return None


def keyed_names(expr: cst.CSTNode) -> set[str]:
    """``names_in``, with a setting looked up by a literal key read as the attribute it names:
    ``config["epochs"]``, ``cfg.get("epochs", 100)`` -> ``config.epochs``, ``cfg.epochs`` (a dict of
    settings says what a value counts by its key as a namespace does by its attribute)."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        name = dotted(node) if kind is cst.Name or kind is cst.Attribute else _keyed(node) \
            if kind is cst.Subscript or kind is cst.Call else None
        if name is not None:
            found.add(name)
            continue
        if kind is cst.Lambda or kind is cst.FunctionDef:
            continue
        if kind is cst.Call and last_part(func_name(node) or "") in _SAME_UNIT_CALLS:
            stack.extend(a.value for a in node.args)  # `max(1, args.epochs - 5)`: what it is given counts
            continue
        stack.extend(children(node))
    return found


def _keyed(node: cst.CSTNode, depth: int = 0) -> str | None:
    """``config.epochs`` for ``config["epochs"]`` / ``config.get("epochs", default)`` (also nested:
    ``cfg["train"]["epochs"]``), None for any other subscript or call."""
    if depth > 4:
        return None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        base, key = node.value, node.slice[0].slice.value
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" \
            and node.args and node.args[0].keyword is None and not node.args[0].star:
        base, key = node.func.value, node.args[0].value
    else:
        return None
    text = key.value if isinstance(key, cst.SimpleString) else ""
    word = text[1:-1] if text[:1] in ("'", '"') and text[-1:] == text[:1] else ""
    if not word.isidentifier():
        return None
    root = dotted(base) or _keyed(base, depth + 1)
    return f"{root}.{word}" if root is not None else None


def _given_lengths(fn: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """What a schedule function is given besides the step count, where it is handed over whole:
    ``partial(warmup_cosine, warmup=args.warmup_epochs, total=args.epochs)`` or ``lambda s:
    warmup_cosine(s, args.warmup_epochs, args.epochs)``: those arguments (one, or a list that has a
    unit only where each has the same), literals left out; None where nothing else is passed."""
    if isinstance(fn, cst.Call) and last_part(func_name(fn) or "") == "partial":
        given = [a.value for a in fn.args[1:]]
        star = any(a.star for a in fn.args)
    elif isinstance(fn, cst.Lambda) and isinstance(fn.body, cst.Call) and func_name(fn.body) is not None:
        own = param_names(fn.params)
        reads = [(a.value, own & {n.split(".")[0] for n in names_in(a.value)}) for a in fn.body.args]
        if any(read and not (isinstance(v, cst.Name) and v.value in own) for v, read in reads):
            return None  # `f(step // steps_per_epoch, args.epochs)`: the function is given something else than the step
        given = [v for v, read in reads if not read]
        star = any(a.star for a in fn.body.args)
    else:
        return None
    given = [g for g in given if names_in(g)]
    if star or not given:
        return None
    return given[0] if len(given) == 1 else cst.List([cst.Element(g) for g in given])


_MATH = {"cos", "sin", "exp", "log", "sqrt", "pow", "min", "max", "abs", "float", "int", "round", "floor", "ceil"}


def _beyond_parameters(body: cst.CSTNode, params: cst.Parameters) -> cst.CSTNode | None:
    """A schedule function's body, where it names more than its own parameters: ``lambda epoch:
    epoch ** 0.65`` has no horizon, its ``epoch`` is the step count the scheduler passes in."""
    own = param_names(params)
    return body if any(last_part(n) not in own and n.split(".")[0] not in own for n in names_in(body)) else None


def _lengths(body: cst.CSTNode, params: cst.Parameters) -> cst.BaseExpression | None:
    """What a schedule function divides its step count by (``0.5 * (1 + math.cos(math.pi * epoch /
    args.epochs))`` -> ``args.epochs``): the lengths it runs over, without the constants and math
    around them; None where it hands the count to another function (``cosine(step // len(loader),
    args.epochs)``), which may count in other units."""
    if any(isinstance(n, cst.Call) and last_part(func_name(n) or "") not in _MATH for n in walk(body)):
        return None
    own = param_names(params)
    lengths = [n.right for n in walk(body) if isinstance(n, cst.BinaryOperation) and isinstance(
        n.operator, cst.Divide) and not own.isdisjoint(names_in(n.left))
        and own.isdisjoint(names_in(n.right)) and names_in(n.right)]
    if len(lengths) == 1:
        return lengths[0]
    return cst.List([cst.Element(length) for length in lengths]) if lengths else None


def _uncast(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``int(x)``, ``round(x)``, ``math.ceil(x)`` -> ``x``: the cast keeps what ``x`` counts."""
    while isinstance(expr, cst.Call) and last_part(func_name(expr) or "") in _CASTS and len(expr.args) == 1:
        expr = expr.args[0].value
    return expr
