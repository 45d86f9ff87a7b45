"""What the file itself says a name's value is: literals, single assignments, argparse defaults.

``numeric(args.lr * 64 / 256)`` is 2.5e-4 when the file has ``parser.add_argument("--lr",
default=1e-3)``; anything the file does not pin down is ``None``, and rules stay silent on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Framework
from loopcheck.model.index import Index
from loopcheck.model.roles import Role, role_of_constructor
from loopcheck.model.syntax import dotted, func_name, keyword, last_part, method, names_in, param_names, positional
from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.model.training import TrainingLoop

# A learning rate's name (`lr`, `base_lr`, `cfg.SOLVER.BASE_LR`, `learning_rate`) and a batch size's
LR_NAME = Pattern(r"(^|_)(lr|learning_rate)$", re.I)
BATCH_SIZE_NAME = Pattern(r"batch_size|(^|_)bs$|batchsize", re.I)

_MAX_DEPTH = 4  # names followed by expanded_names
_MAX_NUMERIC_DEPTH = 8  # syntax nodes followed by numeric


def call_keywords(call: cst.Call, index: Index) -> Iterator[tuple[str, cst.BaseExpression, cst.Arg]]:
    """(name, value, argument) for each keyword ``call`` is given, also through a dict of the file
    handed over as ``**kwargs`` (``kwargs = {"sampler": sampler}`` or ``dict(sampler=sampler)``, then
    ``DataLoader(**kwargs)``: the argument is then ``**kwargs``)."""
    for arg in call.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg.value, arg
        elif arg.star == "**" and isinstance(arg.value, cst.Name):
            for value in index.values.get(arg.value.value, []):
                for name, item in _dict_items(value):
                    yield name, item, arg


def _dict_items(value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """(key, value) of ``{"key": value, ...}`` or ``dict(key=value, ...)``."""
    if isinstance(value, cst.Dict):
        return [(e.key.evaluated_value, e.value) for e in value.elements  # type: ignore[union-attr]
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                and isinstance(e.key.evaluated_value, str)]
    if isinstance(value, cst.Call) and func_name(value) == "dict":
        return [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
    return []


def argparse_defaults(index: Index) -> dict[str, cst.BaseExpression]:
    """``--batch-size`` / ``--batch_size`` with ``default=64`` -> {"batch_size": 64}."""
    defaults: dict[str, cst.BaseExpression] = {}
    for call in index.calls:
        called = method(call)
        if called is None or called[1] != "add_argument":
            continue
        default = keyword(call, "default")
        flags = [a for a in positional(call) if isinstance(a, cst.SimpleString)]
        if default is None or not flags:
            continue
        name = flags[-1].evaluated_value
        if isinstance(name, str):
            defaults[name.lstrip("-").replace("-", "_")] = default
    return defaults


def option_defaults(index: Index) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """Each ``add_argument`` option's name in the parsed namespace (``dest=``, else its first ``--long``
    flag, as argparse names it) and its ``default=`` expression (None where it has none)."""
    for call in index.calls:
        called = method(call)
        if called is None or called[1] != "add_argument":
            continue
        default = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "default"), None)
        dest = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dest"), None)
        flags = [a.value.value.strip("'\"") for a in call.args
                 if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        name = dest.value.strip("'\"") if isinstance(dest, cst.SimpleString) else next(
            (f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")), None)
        if name:
            yield name, default


def definitions(name: str, index: Index, defaults: bool = True) -> list[cst.BaseExpression]:
    """Every value the file gives ``name`` (its last part): assignments, or else an argparse default
    (unless ``defaults`` is False: a flag's default is what the user overrides, and so is the default
    of a dataclass's or attrs class's field, which the constructor's caller sets)."""
    short = last_part(name)
    found = index.values.get(short, [])
    if not defaults:
        return [v for v in found if id(v) not in index.field_defaults]
    if found:
        return found
    default = argparse_defaults(index).get(short)
    return [default] if default is not None else []


def numeric(expr: cst.BaseExpression, index: Index, depth: int = 0, defaults: bool = True) -> float | None:
    """The number ``expr`` always is, by the file's literals and assignments; ``defaults``: argparse
    defaults count too."""
    if depth > _MAX_NUMERIC_DEPTH:
        return None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = numeric(expr.expression, index, depth + 1, defaults)
        return -inner if inner is not None else None
    if isinstance(expr, cst.Call) and func_name(expr) in ("int", "float") and len(expr.args) == 1:
        return numeric(expr.args[0].value, index, depth + 1, defaults)
    if isinstance(expr, cst.Subscript):
        item = _dict_item(expr, index)
        return numeric(item, index, depth + 1, defaults) if item is not None else None
    if isinstance(expr, cst.BinaryOperation):
        left = numeric(expr.left, index, depth + 1, defaults)
        right = numeric(expr.right, index, depth + 1, defaults)
        if left is None or right is None:
            return None
        op = expr.operator
        if isinstance(op, cst.Multiply):
            return left * right
        if isinstance(op, cst.Divide) and right:
            return left / right
        if isinstance(op, cst.FloorDivide) and right:
            return float(left // right)
        if isinstance(op, cst.Add):
            return left + right
        if isinstance(op, cst.Subtract):
            return left - right
        if isinstance(op, cst.Power):
            return float(left ** right)
        return None
    name = dotted(expr)
    if name is not None:
        values = definitions(name, index, defaults)
        numbers = {numeric(v, index, depth + 1, defaults) for v in values}
        return numbers.pop() if len(numbers) == 1 else None
    return None


# A clip threshold this large never binds: the "no clipping" spelling (`max_norm=1e9`, `float("inf")`),
# even on gradients scaled by an AMP loss scale (65536 times, a real norm of 15,000 before it binds)
_NO_CLIP = 1e9
_INFINITE = {"inf", "math.inf", "np.inf", "numpy.inf", "torch.inf"}


def clips_nothing(call: cst.Call, index: Index) -> bool:
    """``clip_grad_norm_(params, 1e9)``, ``clip_grad_norm_(params, MAX_GRAD_NORM or 1e9)`` with
    ``MAX_GRAD_NORM = None``, ``max_norm=float("inf")``: a threshold the file pins at ``_NO_CLIP`` or
    above, which no gradient reaches (the norm is still computed)."""
    threshold = keyword(call, "max_norm") or keyword(call, "clip_value")
    if threshold is None:
        args = positional(call)
        threshold = args[1] if len(args) > 1 else None
    if type(threshold) is cst.BooleanOperation and type(threshold.operator) is cst.Or:
        # `MAX_GRAD_NORM or 1e9`: the right side where the left is None or 0
        left = definitions(name, index, defaults=False) if (name := dotted(threshold.left)) else [threshold.left]
        if not left or not all(type(v) is cst.Name and v.value == "None" or numeric(v, index, defaults=False) == 0
                               for v in left):
            return False
        threshold = threshold.right
    if threshold is None:
        return False
    if type(threshold) is cst.Call and func_name(threshold) == "float" and len(threshold.args) == 1 \
            and type(text := threshold.args[0].value) is cst.SimpleString:
        return text.evaluated_value.strip().lower() in ("inf", "infinity", "+inf")
    if dotted(threshold) in _INFINITE:
        return True
    value = numeric(threshold, index, defaults=False)
    return value is not None and value >= _NO_CLIP


def _dict_item(expr: cst.Subscript, index: Index) -> cst.BaseExpression | None:
    """``config["batch_size"]`` where the file binds ``config`` once, to a dict literal."""
    name = dotted(expr.value)
    key = expr.slice[0].slice if len(expr.slice) == 1 else None
    if name is None or not isinstance(key, cst.Index) or not isinstance(key.value, cst.SimpleString):
        return None
    values = index.values.get(last_part(name), [])
    if len(values) != 1 or not isinstance(values[0], cst.Dict):
        return None
    found = [e.value for e in values[0].elements if isinstance(e, cst.DictElement)
             and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key.value.evaluated_value]
    return found[0] if len(found) == 1 else None


def expanded_names(expr: cst.BaseExpression, index: Index, depth: int = 0) -> set[str]:
    """The names ``expr`` reads, following names the file assigns exactly once."""
    found: set[str] = set()
    for name in names_in(expr):
        found.add(name)
        values = index.values.get(last_part(name), [])
        if depth < _MAX_DEPTH and len(values) == 1:
            found |= expanded_names(values[0], index, depth + 1)
    return found


def optimizer_lr_expressions(index: Index) -> list[tuple[cst.BaseExpression, cst.Call]]:
    """The ``lr=`` (or second positional) argument of each optimizer the file constructs."""
    found = []
    for calls in index.roles.constructed.values():
        for call in calls:
            if role_of_constructor(func_name(call) or "") is not Role.OPTIMIZER:
                continue
            lr = keyword(call, "lr")
            args = positional(call)
            if lr is None and len(args) > 1:
                lr = args[1]
            if lr is not None:
                found.append((lr, call))
    return found


def optimizer_lrs(index: Index) -> list[tuple[cst.BaseExpression, float]]:
    """The ``lr=`` of each optimizer the file constructs, where the file pins its value down."""
    found = []
    for lr, _ in optimizer_lr_expressions(index):
        value = numeric(lr, index)
        if value is not None:
            found.append((lr, value))
    return found


def accumulation_gates_nothing(training: TrainingLoop, index: Index) -> bool:
    """The loop's accumulation count is 1 as the file ships it (``config = {"batch_size": 16}`` and
    ``N = batch_size // MAX_GPU_BATCH_SIZE`` with ``MAX_GPU_BATCH_SIZE = 16``; a command-line flag's
    default does not count), or, in an Accelerate loop, 1 unless DeepSpeed sets it (below): its step
    condition changes nothing, so nothing about its windows can be wrong."""
    count = training.modulus
    if count is not None and numeric(count, index, defaults=False) == 1 and not _passed_in(training, count, index):
        return True
    return bool(training.backwards) and all(b.framework is Framework.ACCELERATE for b in training.backwards) \
        and one_unless_deepspeed(count, index)


def _passed_in(training: TrainingLoop, count: cst.BaseExpression, index: Index) -> bool:
    """The count is a parameter of the loop's function that some caller (another module's, where
    the file calls it nowhere) passes other than as 1: the file's own ``accumulate = 1`` (a warmup
    epoch's) is one of its values, not the only one."""
    function = training.loop.function
    name = dotted(count)
    if function is None or name is None or name not in param_names(function.params):
        return False
    passed = index.arguments.get(f"{function.name.value}({name})", [])
    return not passed or any(numeric(v, index, defaults=False) != 1 for v in passed)


def one_unless_deepspeed(count: cst.BaseExpression | None, index: Index) -> bool:
    """The accumulation count is ``1``, or read from a DeepSpeed config (``gradient_accumulation_steps
    = 1`` / ``= ...deepspeed_config["gradient_accumulation_steps"]``): with 1 every condition on it
    holds, and under DeepSpeed its engine accumulates, syncs and steps inside ``accelerator.backward``
    while the prepared optimizer's and scheduler's own ``step()`` do nothing. Either way a condition
    on the count gates nothing."""
    name = dotted(count) if count is not None else None
    values = index.values.get(last_part(name), []) if name else []
    ones = [v for v in values if numeric(v, index) == 1]
    deepspeed = [v for v in values if any("deepspeed" in n.lower() for n in names_in(v))]
    return bool(ones) and bool(deepspeed) and len(ones) + len(deepspeed) == len(values)
