"""How the loss handed to backward was scaled: divided, multiplied, or passed on raw.

Follows the loss variable back through the assignments of its loop (``loss = loss / N``,
``loss /= N``, ``loss = criterion(out, y)``); anything it cannot follow is ``UNKNOWN``. A
multiplication by a loss scale (``loss * 2 ** self.lg_loss_scale``, ``loss * loss_scale``) is
manual mixed precision, not a normalisation: the scaling of the other operand decides.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from functools import lru_cache

import libcst as cst

from loopcheck.model.events import Loop
from loopcheck.model.syntax import dotted, func_name, int_value, last_part, method, names_in, source, walk
from loopcheck.patterns import Pattern


class Scaling(enum.Enum):
    DIVIDED = "divided"  # by N, a count, a token total: normalised
    MULTIPLIED = "multiplied"  # an explicit scale (yolov5's `* batch_size`): the author decided
    RUNNING = "divided by a running count"  # `loss / k` with k counting micro-batches: weights 1/k
    TIMES_COUNT = "multiplied by the accumulation count"  # `loss * N`: an N^2-fold window sum, not a mean
    RAW = "raw"  # straight from a criterion or model output
    UNKNOWN = "unknown"


_DIV = (cst.Divide, cst.FloorDivide)
_PASS_THROUGH = ("mean", "sum", "float", "to", "squeeze", "contiguous", "clone")
_DIV_METHODS = ("div", "div_", "true_divide", "divide")
_ERROR_TERMS = ("pow", "square", "abs")  # of an error `out - y`: the terms a hand-written loss averages
_MODULES = ("torch", "F", "np", "numpy")  # `torch.abs(x)` is a function of them, not a method of `torch`
_MUL_METHODS = ("mul", "mul_", "multiply")


_ACCUMULATION = Pattern(r"accum|grad_acc", re.I)
_DIVIDING = (cst.Divide, cst.FloorDivide, cst.DivideAssign, cst.FloorDivideAssign, cst.Power, cst.PowerAssign)


def loss_scaling(expr: cst.BaseExpression, loop: Loop, order: int,
                 known_functions: Mapping[str, list[cst.FunctionDef]], accumulation_names: set[str],
                 depth: int = 0, through_forward_helpers: bool = False, module: cst.Module | None = None) -> Scaling:
    """How ``expr`` is scaled; ``known_functions`` are the file's functions by name (a helper may
    normalise inside). With ``through_forward_helpers``, a helper that only runs the model and returns
    its outputs is read as the model's own (unscaled) outputs, and (given the ``module``) a method of
    the loop's own class that runs the model and a criterion and returns the loss undivided as that
    raw loss."""
    return _Reader(loop, known_functions, accumulation_names, through_forward_helpers, module).scaling(
        expr, order, depth)


class _Reader:
    def __init__(self, loop: Loop, known_functions: Mapping[str, list[cst.FunctionDef]], accumulation_names: set[str],
                 through_forward_helpers: bool, module: cst.Module | None = None) -> None:
        self.loop = loop
        self.module = module
        self.known_functions = known_functions
        self.through_forward_helpers = through_forward_helpers
        self.accumulation_names = accumulation_names
        # `k += 1` in the loop: a running count of micro-batches (or steps)
        self.counters = {n for a in loop.assignments if a.op == "AddAssign" and int_value(a.value) == 1
                         for n in a.names}

    def scaling(self, expr: cst.BaseExpression, order: int, depth: int) -> Scaling:
        if depth > 10:  # a sum of several components, each read back through its own assignments
            return Scaling.UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, order, depth)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            return self.scaling(expr.expression, order, depth + 1)  # `-torch.min(s1, s2).mean()`: the same scale
        if isinstance(expr, cst.Call):
            return self._call(expr, order, depth)
        if isinstance(expr, cst.Subscript) and self._items_rescaled(expr.value):
            return Scaling.UNKNOWN  # `for key in outputs: outputs[key] = outputs[key].mean() * percent`
        if isinstance(expr, cst.Subscript) or isinstance(expr, cst.Attribute) and dotted(expr) is None:
            return self.scaling(expr.value, order, depth + 1)  # `out["loss"]`, `model(**batch).loss`
        name = dotted(expr)
        if name is None:
            return Scaling.UNKNOWN
        assignments = [a for a in self.loop.assignments_before(name, order) if a.op != "for"]
        if not assignments:
            if isinstance(expr, cst.Attribute):  # `outputs.loss`: follow `outputs`
                return self.scaling(expr.value, order, depth + 1)
            return Scaling.UNKNOWN
        for a in assignments:
            if a.op in ("DivideAssign", "FloorDivideAssign"):
                return self._divisor(a.value)
            if a.op == "MultiplyAssign" and self._is_count(a.value) and self.scaling(
                    expr, a.order, depth + 1) is Scaling.RAW:
                return Scaling.TIMES_COUNT  # `loss *= N` on one micro-batch's raw loss
            if a.op == "MultiplyAssign" and not _divides_nothing(a.value):
                return Scaling.MULTIPLIED
            if a.op not in ("=", "MultiplyAssign"):
                return Scaling.UNKNOWN  # `loss += ...`: summed over something we do not follow
        last = assignments[-1]
        if last.op == "=" and not any(a.op == "MultiplyAssign" for a in assignments):
            divisions = [n for n in walk(last.value) if isinstance(n, cst.BinaryOperation) and isinstance(
                n.operator, _DIV)]
            if divisions:
                return self._divisor(divisions[0].right)
        if last.op == "=" and type(last.value) is cst.Call and _handed_on(last.value, name, self.known_functions):
            # `loss = scale_loss_for_ddp(loss)`: a helper handed the loss itself passes its scaling on
            handed = self.scaling(expr, last.order, depth + 1)
            if handed not in (Scaling.RAW, Scaling.UNKNOWN):
                return handed
        return self.scaling(last.value, last.order, depth + 1)

    def _binary(self, expr: cst.BinaryOperation, order: int, depth: int) -> Scaling:
        if isinstance(expr.operator, _DIV):
            return self._divisor(expr.right)
        if isinstance(expr.operator, cst.Multiply):
            if _divides_nothing(expr.right) and not self._normalisation(expr.right, order):
                return self.scaling(expr.left, order, depth + 1)
            if _divides_nothing(expr.left) and not self._normalisation(expr.left, order):
                return self.scaling(expr.right, order, depth + 1)
            for factor, other in ((expr.left, expr.right), (expr.right, expr.left)):
                if self._objective_weight(factor, order):
                    return self.scaling(other, order, depth + 1)
            for factor, other in ((expr.right, expr.left), (expr.left, expr.right)):
                if self._is_count(factor) and self.scaling(other, order, depth + 1) is Scaling.RAW:
                    return Scaling.TIMES_COUNT
            return Scaling.MULTIPLIED
        if isinstance(expr.operator, cst.Power):
            # `((out - y) ** 2).mean()`: an error raised to a literal power is a raw loss term
            return self._raw_only(expr.left, order, depth) if isinstance(expr.right, (cst.Integer, cst.Float)) \
                else Scaling.UNKNOWN
        left = self.scaling(expr.left, order, depth + 1)
        right = self.scaling(expr.right, order, depth + 1)
        if isinstance(expr.operator, (cst.Add, cst.Subtract)) and {left, right} == {Scaling.RAW, Scaling.MULTIPLIED} \
                and _weighted_term(expr.right if right is Scaling.MULTIPLIED else expr.left):
            return Scaling.RAW  # `loss_qa + opts.lw_st_ed * loss_st_ed`: a weighted component, no normalisation
        return left if left == right else Scaling.UNKNOWN

    def _items_rescaled(self, container: cst.BaseExpression) -> bool:
        """The loop stores into ``container`` by a key it computes (``outputs[key] = ...`` over its
        keys): which scale each item then has is not read."""
        name = dotted(container)
        return name is not None and any(
            type(node) is cst.Assign and any(type(t.target) is cst.Subscript and dotted(t.target.value) == name
                                             and len(t.target.slice) == 1 and type(t.target.slice[0].slice) is cst.Index
                                             and type(t.target.slice[0].slice.value) is cst.Name for t in node.targets)
            for node in walk(self.loop.node))

    def _is_count(self, factor: cst.BaseExpression) -> bool:
        """``factor`` is the step test's accumulation count itself (``accum_iters``, ``self.accum_iters``)."""
        name = dotted(factor)
        return name is not None and last_part(name) in self.accumulation_names

    def _objective_weight(self, factor: cst.BaseExpression, order: int) -> bool:
        """``lambda_coeff * loss``, ``loss * self.kl_weight``: the weight of one objective among several
        (each back-propagated and summed into the window like any loss), named so and bound to nothing
        here that divides or names the accumulation count (``w = 1 / N`` is the normalisation)."""
        name = dotted(factor)
        if name is None or _WEIGHT_WORDS.isdisjoint(last_part(name).lower().split("_")) \
                or last_part(name) in self.accumulation_names:
            return False
        return all(value is not None and not _normalises(value, self.accumulation_names)
                   for value in self._values(name, order, methods=True))

    def _normalisation(self, factor: cst.BaseExpression, order: int) -> bool:
        """A factor bound only to normalising values (verl's ``loss_scale_factor = 1 /
        self.gradient_accumulation``), whatever its name says: ``loss * factor`` divides the loss. Bound
        in the loops only: a loss scaler's own ``self.loss_scale /= 2`` halves a loss scale."""
        name = dotted(factor)
        values = self._values(name, order) if name is not None else []
        return bool(values) and all(value is not None and _normalises(value, self.accumulation_names)
                                    and not _is_loss_scale(value) for value in values)

    def _values(self, name: str, order: int, methods: bool = False) -> list[cst.BaseExpression | None]:
        """What ``name`` is bound to before ``order``: in the loop, before it (``loss_weight = 1.0 / N``)
        and (``methods``), for ``self.loss_weight``, in any method of the file; None for a binding not
        by ``=``."""
        values = [a.value if a.op == "=" else None for a in self.loop.assignments_before(name, order)]
        outer = self.loop.parent
        while outer is not None:
            values += [a.value if a.op == "=" else None for a in outer.assignments if name in a.names]
            outer = outer.parent
        if methods and "." in name:
            attribute = last_part(name)
            values += [node.value for fns in self.known_functions.values() for fn in fns for node in walk(fn)
                       if isinstance(node, (cst.Assign, cst.AugAssign)) and any(
                           last_part(dotted(t) or "") == attribute
                           for t in ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                                     else [node.target]))]
        return values

    def _call(self, expr: cst.Call, order: int, depth: int) -> Scaling:
        called = method(expr)
        args = [a.value for a in expr.args if a.keyword is None]
        if called is not None and called[1] in _DIV_METHODS and args:  # `loss.sum().div(n)`
            return self._divisor(args[0])
        if called is not None and called[1] in _MUL_METHODS and args:  # edm's `.mul(scale / total)`
            if _divides_nothing(args[0]):
                return self.scaling(called[0], order, depth + 1)
            if self._is_count(args[0]) and self.scaling(called[0], order, depth + 1) is Scaling.RAW:
                return Scaling.TIMES_COUNT
            if any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, _DIV) for n in walk(args[0])):
                return Scaling.DIVIDED
            return Scaling.MULTIPLIED
        if called is not None and called[1] == "scale" and len(args) == 1 and "scaler" in (
                dotted(called[0]) or "").lower():
            # `loss = scaler.scale(loss)`: a GradScaler's loss scale, undone before the step
            return self.scaling(args[0], order, depth + 1)
        if called is not None and dotted(called[0]) in _MODULES and args and (
                called[1] in ("mean", "sum") or called[1] in _ERROR_TERMS and len(args) == 1):
            # `torch.mean((out - y) ** 2)`, `torch.abs(out - y)`: as the method of their first argument
            called, args = (args[0], called[1]), []
        if called is not None and called[1] in _ERROR_TERMS and dotted(called[0]) not in _MODULES and (
                called[1] != "pow" or args and isinstance(args[0], (cst.Integer, cst.Float))):
            return self._raw_only(called[0], order, depth)  # `(out - y).pow(2).mean()`, `(out - y).abs().mean()`
        if called is not None and called[1] in _PASS_THROUGH:
            # `(losses["loss"] * weights).mean()`: the mean of what the parentheses compute
            if dotted(called[0]) is not None or isinstance(
                    called[0], (cst.Subscript, cst.Attribute, cst.Call, cst.BinaryOperation)):
                return self.scaling(called[0], order, depth + 1)
        name = func_name(expr) or ""
        if self.through_forward_helpers and _forwards_only(self.known_functions.get(name, [])) and not any(
                n in self.accumulation_names or n.split(".")[-1] in self.accumulation_names
                for arg in expr.args for n in names_in(arg.value)):
            return Scaling.RAW  # `outputs = forward_step(cfg, model, batch)`: the model's own outputs
        if self.through_forward_helpers and self._own_loss_method(name) and not any(
                n in self.accumulation_names or n.split(".")[-1] in self.accumulation_names
                for arg in expr.args for n in names_in(arg.value)):
            return Scaling.RAW  # `loss = self._get_loss(x, target)`: one micro-batch's criterion, undivided
        if self.module is not None and _trained_attribute(name, self.known_functions, self.module) and not any(
                n in self.accumulation_names or n.split(".")[-1] in self.accumulation_names
                for arg in expr.args for n in names_in(arg.value)):
            return Scaling.RAW  # `self.model(x)`: the forward of the module the file trains, as `model(x)` is
        if name.split(".", 1)[0] in self.known_functions or name.startswith("self.") and not _criterion_attribute(
                name, self.known_functions):
            return Scaling.UNKNOWN  # a helper of this file (or of a base class), which may normalise inside
        if not name:
            return Scaling.UNKNOWN  # `f(x)(y)`, `self.losses[k](...)`: nothing to read
        if any(n in self.accumulation_names or n.split(".")[-1] in self.accumulation_names
               for arg in expr.args for n in names_in(arg.value)):
            return Scaling.UNKNOWN  # it is told N: it may divide by it
        return Scaling.RAW

    def _raw_only(self, base: cst.BaseExpression, order: int, depth: int) -> Scaling:
        """RAW where ``base`` is raw (a model output minus a target), UNKNOWN otherwise: a power or
        absolute value of a divided loss is no division by N."""
        return Scaling.RAW if self.scaling(base, order, depth + 1) is Scaling.RAW else Scaling.UNKNOWN

    def _own_loss_method(self, name: str) -> bool:
        """``self.name`` is a method of the loop's own class (the file's only function of that name)
        whose body runs the model and a criterion and returns that loss undivided."""
        parts = name.split(".")
        found = self.known_functions.get(parts[-1], [])
        if self.module is None or len(parts) != 2 or parts[0] != "self" or len(found) != 1 \
                or self.loop.function is None:
            return False
        fn = found[0]
        params = fn.params.params
        if not params or params[0].name.value != "self":
            return False
        same_class = any(isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock)
                         and fn in stmt.body.body and self.loop.function in stmt.body.body
                         for stmt in self.module.body)
        return same_class and _returns_own_loss(fn, self.accumulation_names, self.known_functions)

    def _divisor(self, divisor: cst.BaseExpression) -> Scaling:
        """``loss / k`` with ``k += 1`` in the loop (alone or ``k + 1``-style): a running count."""
        if any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in walk(divisor)):
            return Scaling.DIVIDED
        names = names_in(divisor)
        if names and all(n in self.counters for n in names) and not any(
                last_part(n) in self.accumulation_names for n in names):
            return Scaling.RUNNING
        return Scaling.DIVIDED


# `self.criterion(out, y)`, `self.loss_fn(...)`, `self.loss(...)`: a loss module the object holds
_CRITERION = Pattern(r"^(criterion|criteria|loss|loss_fn|loss_func|loss_function|lossfn)$|_criterion$|^criterion_", re.I)


def _criterion_attribute(name: str, known_functions: Mapping[str, list[cst.FunctionDef]]) -> bool:
    """``self.criterion(...)`` where ``criterion`` is no function of this file: a loss module held by
    the object, which computes one micro-batch's loss and is not told N (a method of the class, which
    may normalise, is a function of the file or of a base class, and is not named so)."""
    parts = name.split(".")
    return len(parts) == 2 and parts[1] not in known_functions and bool(_CRITERION.search(parts[1]))


def _trained_attribute(name: str, known_functions: Mapping[str, list[cst.FunctionDef]], module: cst.Module) -> bool:
    """``self.model(...)`` where ``model`` is no function of this file and the file reads
    ``self.model.parameters()`` (to clip them, or to build the optimizer): a module the file trains,
    whose call is its forward, not a method of the class (or of a base class) that may normalise."""
    parts = name.split(".")
    return len(parts) == 2 and parts[0] == "self" and parts[1] not in known_functions \
        and parts[1] in _parameters_read(module)


@lru_cache(maxsize=8)  # asked once per backward of the same file
def _parameters_read(module: cst.Module) -> frozenset[str]:
    """The attributes ``X`` of ``self.X.parameters()`` / ``self.X.named_parameters()`` in ``module``."""
    found = set()
    for node in walk(module, into_functions=True):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "parameters", "named_parameters"):
            owner = dotted(node.func.value) or ""
            if owner.count(".") == 1 and owner.startswith("self."):
                found.add(owner[5:])
    return frozenset(found)


def _forwards_only(found: list[cst.FunctionDef]) -> bool:
    """``found`` is one function of the file (the only one of its name), and it only hands back what
    calling one of its parameters (the model) computed: ``outputs = model(batch); return outputs``, with
    no arithmetic anywhere in it that could normalise (ClipBERT's ``forward_step(cfg, model, batch)``)."""
    if len(found) != 1:
        return False
    fn = found[0]
    if not isinstance(fn.body, cst.IndentedBlock) or len(fn.body.body) > 6:
        return False  # a short wrapper around the forward, or not one
    params = {p.name.value for p in fn.params.params}
    calls: set[str] = set()  # names bound to a call of a parameter
    pieces: set[str] = set()  # names bound to a piece of a parameter (`ids = batch["question_ids"]`)
    returned: list[cst.BaseExpression | None] = []
    # statements before the first call of a parameter only prepare its input: arithmetic there that
    # divides nothing and names no accumulation count (ALPRO's ``repeat_counts = [e * cfg.num_labels
    # for e in batch["n_examples_list"]]``) cannot scale what the model returns
    first_call = next((i for i, stmt in enumerate(fn.body.body) if any(
        isinstance(n, cst.Call) and dotted(n.func) in params for n in walk(stmt))), len(fn.body.body))
    before = {id(n) for stmt in fn.body.body[:first_call] for n in walk(stmt)
              if isinstance(n, (cst.BinaryOperation, cst.AugAssign)) and _prepares_input(n)}
    for node in walk(fn.body):
        if isinstance(node, (cst.BinaryOperation, cst.AugAssign)) and id(node) not in before:
            return False
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and dotted(node.value.func) in params:
            calls.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Subscript) \
                and dotted(node.value.value) in params:
            pieces.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        elif isinstance(node, cst.Return):
            returned.append(node.value)

    def output(value: cst.BaseExpression | None) -> bool:
        return isinstance(value, cst.Call) and dotted(value.func) in params \
            or isinstance(value, cst.Name) and value.value in calls

    # `return outputs, question_ids`: the model's outputs handed back beside a piece of its input
    return bool(returned) and all(
        output(value) or isinstance(value, cst.Tuple) and any(output(e.value) for e in value.elements)
        and all(output(e.value) or isinstance(e.value, cst.Name) and e.value.value in pieces
                for e in value.elements)
        for value in returned)


def _returns_own_loss(fn: cst.FunctionDef, accumulation_names: set[str],
                      known_functions: Mapping[str, list[cst.FunctionDef]]) -> bool:
    """``out = self.model(x); loss = self.criterion(out, target); return loss`` (holocron's
    ``Trainer._get_loss``): a method that runs the model held by the object and a criterion it holds,
    and returns that loss (alone, or beside the model's outputs). Any division, power, ``div`` call or
    name of the accumulation count in it keeps the helper unread: it may normalise."""
    for node in walk(fn.body):
        if isinstance(node, (cst.BinaryOperation, cst.AugAssign)) and isinstance(node.operator, _DIVIDING):
            return False
        if isinstance(node, cst.Call) and (method(node) or (None, ""))[1] in (*_DIV_METHODS, *_MUL_METHODS):
            return False
    if any(_ACCUMULATION.search(n) or last_part(n) in accumulation_names for n in names_in(fn.body)):
        return False

    def criterion(value: cst.BaseExpression) -> bool:  # `self.criterion(...)`, `cast(Tensor, self.criterion(...))`
        if isinstance(value, cst.Call) and func_name(value) == "cast" and len(value.args) == 2:
            value = value.args[1].value
        while isinstance(value, cst.Call) and (method(value) or (None, ""))[1] in _PASS_THROUGH:
            value = method(value)[0]  # type: ignore[index]  # `self.criterion(out, y).mean()`
        name = func_name(value) if isinstance(value, cst.Call) else None
        return name is not None and name.startswith("self.") and _criterion_attribute(name, known_functions)

    outputs: set[str] = set()  # names bound to `self.model(...)`
    losses: set[str] = set()  # names bound to the criterion's value
    returned: list[cst.BaseExpression | None] = []
    for node in walk(fn.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            target = node.targets[0].target.value
            if isinstance(node.value, cst.Call) and func_name(node.value) == "self.model":
                outputs.add(target)
            elif criterion(node.value):
                losses.add(target)
            elif target in losses | outputs:
                return False  # rebound to something else
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            return False  # the loss or outputs rebound by arithmetic: not read
        elif isinstance(node, cst.Return):
            returned.append(node.value)
    if not outputs or not losses or not returned:
        return False

    def loss(value: cst.BaseExpression | None) -> bool:
        return isinstance(value, cst.Name) and value.value in losses or value is not None and criterion(value)

    # `return loss, out`: the loss beside the model's outputs
    return all(loss(value) or isinstance(value, cst.Tuple) and sum(loss(e.value) for e in value.elements) == 1
               and all(loss(e.value) or isinstance(e.value, cst.Name) and e.value.value in outputs
                       for e in value.elements)
               for value in returned)


def _prepares_input(node: cst.BinaryOperation | cst.AugAssign) -> bool:
    """Arithmetic that is no division and names no accumulation count."""
    if any(isinstance(n, (cst.BinaryOperation, cst.AugAssign)) and isinstance(n.operator, _DIVIDING)
           for n in walk(node)):
        return False
    return not any(_ACCUMULATION.search(n) for n in names_in(node))


def _weighted_term(expr: cst.BaseExpression) -> bool:
    """``opts.lw_st_ed * loss_st_ed``, ``0.5 * aux_loss``, ``loss_kl * args.kl_weight``: one component of
    a sum of losses multiplied by its weight (a float literal or a name saying so), which is no scale of
    the whole loss."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Multiply):
        return False
    for factor in (expr.left, expr.right):
        if isinstance(factor, cst.Float):
            return True
        name = dotted(factor)
        if name is not None and not _WEIGHT_WORDS.isdisjoint(last_part(name).lower().split("_")):
            return True
    return False


# the words of a loss weight's name: `lw_st_ed`, `kl_weight`, `lambda_mlm`, `aux_coef`, `w_reg`
_WEIGHT_WORDS = frozenset({"lw", "w", "weight", "weights", "lambda", "lambd", "lamb", "coef", "coeff", "alpha",
                           "beta", "gamma"})


def _handed_on(call: cst.Call, name: str, known_functions: Mapping[str, list[cst.FunctionDef]]) -> bool:
    """``name = f(name)``: a function of another module (``reduce_loss``, ``scale_loss_for_ddp``) handed
    the very value it rebinds, as its only positional argument."""
    called = func_name(call)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return called is not None and method(call) is None and called.split(".", 1)[0] not in known_functions \
        and len(positional) == 1 and dotted(positional[0]) == name


def _divides_nothing(expr: cst.BaseExpression) -> bool:
    """A factor that is no normalisation of the loss, so the other operand's scaling decides: a
    mixed-precision loss scale, or a count of labels."""
    return _is_loss_scale(expr) or _label_count(expr)


# `cfg.num_labels`, `n_classes`, `num_answers`: how many outputs a mean over the label axis averaged
_LABEL_COUNT = Pattern(r"^(num|n|nb|number_of)_?(labels?|class(es)?|answers?|categories)$", re.I)
# `targets`, `batch["labels"]`, `answer_targets`: the multi-label targets the label axis is read from
_LABELS = Pattern(r"target|label", re.I)


def _normalises(value: cst.BaseExpression, accumulation_names: set[str]) -> bool:
    """A weight's value that divides, or names the accumulation count (``1.0 / N``, ``N ** -1``)."""
    return any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (*_DIV, cst.Power))
               or isinstance(n, cst.Call) and (method(n) or (None, ""))[1] in _DIV_METHODS for n in walk(value)) \
        or any(last_part(n) in accumulation_names for n in names_in(value))


def _label_count(expr: cst.BaseExpression) -> bool:
    """``cfg.num_labels``, ``targets.size(1)``, ``batch["targets"].shape[-1]``: the number of labels,
    by which a mean over a multi-label (BCE) loss's label axis is undone (UNITER's instance-level
    BCE). It turns a per-element mean into a per-example sum of labels, still averaged over the
    micro-batch: it divides nothing by the accumulation count."""
    name = dotted(expr)
    if name is not None:
        return bool(_LABEL_COUNT.search(last_part(name)))
    if isinstance(expr, cst.Call):
        called = method(expr)
        args = [a.value for a in expr.args if a.keyword is None]
        return called is not None and called[1] == "size" and len(args) == 1 and int_value(args[0]) in (1, -1) \
            and bool(_LABELS.search(source(called[0])))
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape" \
            and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        return int_value(expr.slice[0].slice.value) in (1, -1) and bool(_LABELS.search(source(expr.value.value)))
    return False


def _is_loss_scale(expr: cst.BaseExpression) -> bool:
    """``2 ** self.lg_loss_scale``, ``loss_scale``, ``self.scaler.loss_scale``: a mixed-precision loss
    scale, undone before the step (not a normalisation of the loss)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power) and int_value(expr.left) == 2:
        return True
    name = dotted(expr)
    return name is not None and "loss_scale" in last_part(name).lower()
