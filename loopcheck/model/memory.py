"""Which values of a training loop carry an autograd graph, read off the training-loop model.

Certain only for the loss that is back-propagated (the very binding handed to ``backward``), for
the outputs of the trained model called directly (``logits = model(x)``), for what torch's own
differentiable functions compute from such a value (``F.l1_loss(out, y)``), and for what a function
of the same file returns when it is built from them (read with what the call passes in: a helper
returning ``loss_dict``, an element of ``loss, parts = compute_loss(out, y)``, the values of
``for name, value in parts.items()``); anything passed through an unknown function is unknown, and
``.item()``, ``.detach()``, ``float()`` or a value computed under ``torch.no_grad()`` carry none.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module("for x in loader:\\n    loss = f(x)\\n    loss.backward()\\n"))
>>> GraphReader(m, m.training_loops[0]).carries(cst.parse_expression("loss.item()"), 99, ())
False
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Kind
from loopcheck.model.forward_numbers import forward_returns_number
from loopcheck.model.guards import exclusive
from loopcheck.model.optimizers import parameter_owners
from loopcheck.model.roles import Role, role_of_constructor
from loopcheck.model.running_sums import DIFFERENTIABLE_COLLECTIVE
from loopcheck.model.syntax import children, dotted, func_name, is_zero, last_part, method, names_in, own_call_name
from loopcheck.model.syntax import positional, source, target_names, walk
from loopcheck.model.training import TrainingLoop
from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.model import FileModel

_DETACHING = {"item", "detach", "detach_", "tolist", "numpy", "argmax", "argmin", "eq", "ne", "gt", "lt",
              "long", "int", "bool"}
_KEEPING = {"mean", "sum", "clone", "float", "double", "half", "bfloat16", "to", "cpu", "cuda", "view", "reshape",
            "squeeze", "unsqueeze", "contiguous", "flatten"}
_PLAIN = {"float", "int", "bool", "round", "len", "str"}
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)
# torch functions whose result never holds a graph, whatever it is computed from (indices, masks,
# fresh tensors of the same shape)
_GRAPHLESS = {"argmax", "argmin", "argsort", "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite",
              "isclose", "nonzero", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
              "randint_like", "numel", "count_nonzero", "equal", "allclose", "is_tensor", "is_floating_point",
              "unique", "bucketize", "searchsorted", "one_hot", "tensor", "logical_and", "logical_or",
              "logical_not", "all", "any", "bincount", "histc", "no_grad", "inference_mode"}
_WHOLE = object()  # an item of a dict that holds what the dict as a whole holds
_DEPTH = 40  # how deep a value is followed, through names, calls and same-file functions
_TORCH_FUNCTIONAL = Pattern(r"^(?:torch\.(?:nn\.functional\.)?|F\.|nn\.functional\.)(\w+)$")


def trained_modules(model: FileModel) -> set[str]:
    """Names of modules this file trains: their ``.parameters()`` go to an optimizer or a
    clipping call, or ``.train()`` is called on them. An optimizer built by a call that is no torch
    constructor (``getattr(optim, args.optim)(model.parameters())``, ``set_optimizer(opt, model)``,
    ``construct_optimizer(model, cfg)``) trains the modules it is handed. A torch optimizer built with
    ``lr=0`` in a file that calls apex's ``amp.initialize`` trains nothing: apex needs an optimizer to
    cast a momentum encoder to fp16, and its learning rate keeps the weights where they are.
    Read once per file (several rules ask, some once per loop); not to be changed by the caller."""
    known = model.read_once.get("trained_modules")
    if known is None:
        known = model.read_once["trained_modules"] = _trained_modules(model)
    return known  # type: ignore[return-value]


def _trained_modules(model: FileModel) -> set[str]:
    found = {e.receiver for e in model.events(Kind.TRAIN_MODE) if e.receiver}
    apex = "amp.initialize" in model.source
    for call in model.index.calls:
        name = func_name(call) or ""
        if role_of_constructor(name) is Role.OPTIMIZER and apex and _zero_rate(call):
            continue  # CMC/MoCo's `SGD(model_ema.parameters(), lr=0, ...)` exists for amp.initialize only
        if role_of_constructor(name) is Role.OPTIMIZER or name.endswith(("clip_grad_norm_", "clip_grad_value_")):
            found |= parameter_owners(call)
    roles = model.index.roles
    for target, calls in roles.constructed.items():
        if roles.of(target) is not Role.OPTIMIZER:
            continue
        for call in calls:
            if role_of_constructor(func_name(call) or "") is Role.UNKNOWN:
                found |= parameter_owners(call) | {n for a in call.args if (n := dotted(a.value))}
    names = {module_name(n) for n in found}
    return names | _parents_of_parts(names)


def _parents_of_parts(names: set[str]) -> set[str]:
    """``model`` where the optimizer is built over two or more of its parts (``[{"params":
    model.encoder.parameters()}, {"params": model.segmenter.parameters()}]``): the model is trained, and
    ``model.eval()`` switches every part. Not for one part alone (a linear probe's ``model.fc``) nor the
    object of a method (``self``)."""
    children: dict[str, set[str]] = {}
    for name in names:
        if name and "." in name:
            parent, child = name.rsplit(".", 1)
            if parent != "self":
                children.setdefault(parent, set()).add(child)
    return {parent for parent, parts in children.items() if len(parts) > 1}


def _zero_rate(call: cst.Call) -> bool:
    """``lr=0`` (or ``lr=0.0``) written into the optimizer's construction."""
    rate = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "lr"), None)
    return rate is not None and is_zero(rate)


_MOVES = Pattern(r"\.(to|cuda|cpu|float|half|double|bfloat16|eval|train)\([^()]*\)$|\.module$")


# an element picked by a name (`layers[i]`, `layers[inc_i]`); a literal index (`convnets[-1]`, the
# newest of a list whose older ones stay frozen) names that element
_ELEMENT = Pattern(r"\[[ \t]*[^\W\d][^\[\]]*\]$")


def module_name(name: str) -> str:
    """The module behind a receiver: ``model`` for ``model.module`` or ``model.to(device)``;
    ``layers[]`` for an element of a list of modules a name picks (``self.bias_layers[_]``)."""
    while (stripped := _MOVES.sub("", name)) != name:
        name = stripped
    return _ELEMENT.sub("[]", name) if name.endswith("]") else name


def frozen_modules(model: FileModel) -> set[str]:
    """Modules the file freezes on purpose: ``m.requires_grad_(False)`` (or with a flag: frozen in
    some configuration), ``m.eval().requires_grad_(False)``, ``for p in m.parameters(): p.requires_grad = False``."""
    found: set[str] = set()
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] != "requires_grad_":
            continue
        args = [a.value for a in call.args]
        if args and isinstance(args[0], cst.Name) and args[0].value == "True" or not args:
            continue
        name = dotted(called[0]) or (source(called[0]) if isinstance(called[0], cst.Call) else None)
        if name:
            found.add(module_name(name))
    # `for p in m.parameters(): p.requires_grad = False` (lifted into its parent: it runs no backward)
    for loop in [*model.scopes, *model.loops()]:
        for assignment in loop.assignments:
            node = assignment.in_loop or (loop.node if loop.is_loop else None)
            if type(node) is not cst.For or type(node.iter) is not cst.Call:  # type: ignore[union-attr]
                continue
            called, targets = method(node.iter), target_names(node.target)
            if called is None or called[1] not in ("parameters", "named_parameters"):
                continue
            value = assignment.value
            if (assignment.names and assignment.names[0] in {f"{t}.requires_grad" for t in targets}
                    and isinstance(value, cst.Name) and value.value == "False" and dotted(called[0])
                    and not any(c.test is not None and names_in(c.test) & set(targets) for c in assignment.conds)):
                # (not `if "lora" not in n: p.requires_grad = False`: the parameters it spares still train)
                found.add(module_name(dotted(called[0])))  # type: ignore[arg-type]
    return found


def backpropagated_names(model: FileModel) -> set[str]:
    """Every name a backward pass of the file reads, directly or through the assignments that
    built its loss (``torch.stack(losses).mean().backward()`` reads ``losses``) and what was
    appended to the lists it reads (see ``_stored_values``)."""
    values: dict[str, list[cst.BaseExpression]] = {}
    for loop in [*model.scopes, *model.loops()]:
        for assignment in loop.assignments:
            for name, value in _zipped(assignment):
                values.setdefault(name, []).append(value)
    for name, value in _stored_values(model):
        values.setdefault(name, []).append(value)
    found: set[str] = set()
    todo = [n for b in model.events(Kind.BACKWARD) if b.loss is not None for n in graph_reads(b.loss)]
    while todo and len(found) < 200:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        todo.extend(n for value in values.get(name, []) for n in graph_reads(value))
    return found


def graph_reads(expr: cst.BaseExpression) -> set[str]:
    """The names whose graph ``expr`` can carry on: ``names_in``, less what is read only through
    ``.item()``, ``.detach()``, ``float(...)``, ``.data`` (``r - value.item()`` takes no graph from
    ``value``), plus the receiver of a method called on it (``memory.sample_memory()`` reads
    ``memory``, ``total.mean()`` reads ``total``)."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: isinstance() on libcst's ABCs is slow
        if kind is cst.Call:
            called = method(node)  # type: ignore[arg-type]
            if called is not None and called[1] in _DETACHING or func_name(node) in _PLAIN:
                continue
            if called is not None and dotted(called[0]) is not None:
                found.add(dotted(called[0]))  # type: ignore[arg-type]
                stack.extend(node.args)
                continue
        elif kind is cst.Attribute and node.attr.value in ("data", "grad", "shape"):  # type: ignore[attr-defined]
            continue
        elif (kind is cst.Name or kind is cst.Attribute) and dotted(node) is not None:  # type: ignore[arg-type]
            found.add(dotted(node))  # type: ignore[arg-type]
            continue
        elif kind is cst.Lambda or kind is cst.FunctionDef:
            continue
        stack.extend(children(node))
    return found


def _zipped(assignment: Assignment) -> list[tuple[str, cst.BaseExpression]]:
    """(name, value) for each name the assignment binds; ``for log_prob, value, r in zip(a, b, c):``
    binds each name to its own list (``value`` to ``b``), any other binding every name to the whole value."""
    node, value = assignment.node, assignment.value
    if assignment.op == "for" and isinstance(node, cst.For) and isinstance(node.target, cst.Tuple) \
            and isinstance(value, cst.Call) and func_name(value) == "zip" \
            and len(positional(value)) == len(value.args) == len(node.target.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in node.target.elements):
        return [(name, arg) for element, arg in zip(node.target.elements, positional(value))
                for name in target_names(element.value)]
    return [(name, value) for name in assignment.names]


def _stored_values(model: FileModel) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(list, value) for every ``list.append(value)`` of the file: a backward reading the list
    reads the value. An actor-critic's end-of-episode update builds its losses as
    ``for log_prob, value, r in zip(saved_logprobs, saved_values, returns):
    value_losses.append(F.smooth_l1_loss(value, r))``, then back-propagates
    ``torch.stack(value_losses).sum()``: through that list and the loop's names the backward reads
    ``saved_values``, the list the episode's steps kept their graphs in for it."""
    for store in model.events(Kind.STORE):
        if store.receiver and store.value is not None:
            yield store.receiver, store.value


class GraphReader:
    """Answers "does this expression hold an autograd graph?" inside one training loop."""

    def __init__(self, model: FileModel, training: TrainingLoop) -> None:
        self.loop = training.loop
        self.modules = trained_modules(model)
        self.project = model.project
        self.roles = model.roles
        self.module = model.module
        self.functions = model.index.functions
        self.scans: dict[cst.FunctionDef, _Scan] = {}  # shared with the readers of same-file functions
        self.memo: dict[object, bool | None] = {}
        self.sources: list[str] = []  # `path:line` of other modules' functions a True answer relied on
        # the bindings handed to backward: (name, the assignment live at the backward)
        self.backpropagated: list[tuple[str, Assignment | None]] = []
        # the items of a dict handed to backward (`loss["total"].backward()`): (name, key, the dict's
        # binding, the backward's order)
        self.backpropagated_items: list[tuple[str, str, Assignment | None, int]] = []
        for backward in training.backwards:
            for name in _loss_names(backward.loss):
                self.backpropagated.append((name, self.binding(name, backward.order, backward.conds)))
            item = _keyed_item(backward.loss)
            if item is not None and not _items_rebound(training.loop.node, item[0]):
                self.backpropagated_items.append(
                    (*item, self.binding(item[0], backward.order, backward.conds), backward.order))

    def binding(self, name: str, order: int, conds: tuple[Cond, ...]) -> Assignment | None:
        """The latest assignment of ``name`` in the loop before ``order`` that can run with ``conds``;
        a helper's local name only within that helper's call (``d_proba_fake`` of ``g_train`` is not the
        caller's ``d_proba_fake``)."""
        found = [a for a in self.loop.assignments
                 if name in a.names and a.order < order and not exclusive(a.conds, conds)
                 and a.visible_at(order)]
        return max(found, key=lambda a: a.order) if found else None

    def _item(self, name: str, key: str, order: int, conds: tuple[Cond, ...], depth: int) -> bool | None | object:
        """What ``name["key"]`` holds, where the loop tells: the value last stored by that key, or, in a
        dict of losses whose items are back-propagated, a graph for those keys (another key may be a
        number: ``loss["acc"]``); ``_WHOLE`` where only the dict as a whole says. An item named as a
        duration (``output["enctime"]``, ``out["fwd_time"]``) is a timing the model took with ``time.time()``:
        a number."""
        if _TIMING.search(key):
            return False
        if self._rebound(name):
            return None
        binding = self.binding(name, order, conds)
        stored = self._item_store(name, key, order, conds)
        if stored is not None and (binding is None or stored.order > binding.order):
            if any(n == name and k == key and stored.order < b < order for n, k, _, b in self.backpropagated_items):
                return True  # `loss["total"] = a + b`, then `loss["total"].backward()`
            # `loss["total"] = loss["total"].item()` after the backward: what was stored last
            return self.carries(stored.value, stored.order, stored.conds, depth + 1)
        keys = {k for n, k, b, _ in self.backpropagated_items if n == name and b is binding}
        if keys:
            return True if key in keys else None
        return _WHOLE

    def _item_store(self, name: str, key: str, order: int, conds: tuple[Cond, ...]) -> Assignment | None:
        """The latest ``name["key"] = value`` of the loop before ``order`` that can run with ``conds``."""
        found = [a for a in self.loop.assignments if not a.names and a.op == "=" and a.order < order
                 and type(a.node) is cst.Assign and not exclusive(a.conds, conds)
                 and any(_keyed_item(t.target) == (name, key) for t in a.node.targets)]  # type: ignore[attr-defined]
        return max(found, key=lambda a: a.order) if found else None

    def _rebound(self, name: str) -> bool:
        key = ("items rebound", name)
        if key not in self.memo:
            self.memo[key] = _items_rebound(self.loop.node, name)
        return bool(self.memo[key])

    def is_backpropagated(self, name: str) -> bool:
        return any(n == name for n, _ in self.backpropagated)

    def carries(self, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...], depth: int = 0) -> bool | None:
        """True: certainly a graph; False: certainly none; None: unknown."""
        if depth > _DEPTH:
            return None
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return False
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("data", "grad", "shape"):
            return False  # `loss.data[0]`, `p.grad`: no graph
        if isinstance(expr, (cst.Name, cst.Attribute)) and dotted(expr) is not None:
            return self._name(dotted(expr), expr, order, conds, depth)  # type: ignore[arg-type]
        if isinstance(expr, cst.Attribute):
            return self.carries(expr.value, order, conds, depth + 1)
        if isinstance(expr, cst.Subscript):
            if _counted(expr):
                return False  # `out["n_items"]` beside the loss: a count, which no graph differentiates
            item = _keyed_item(expr)
            held = self._item(*item, order, conds, depth) if item is not None else _WHOLE
            return self.carries(expr.value, order, conds, depth + 1) if held is _WHOLE else held  # type: ignore[return-value]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITHMETIC):
            sides = [self.carries(expr.left, order, conds, depth + 1),
                     self.carries(expr.right, order, conds, depth + 1)]
            return True if True in sides else (False if sides == [False, False] else None)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
            values = [e.value for e in expr.elements]  # type: ignore[union-attr]
            found = [self.carries(v, order, conds, depth + 1) for v in values if v is not None]
            return True if True in found else None
        if isinstance(expr, cst.Call):
            return self._call(expr, order, conds, depth)
        return None

    def _call(self, call: cst.Call, order: int, conds: tuple[Cond, ...], depth: int) -> bool | None:
        name = func_name(call)
        functional = _TORCH_FUNCTIONAL.match(name or "")
        if functional is not None and functional.group(1) not in _GRAPHLESS:
            # `F.l1_loss(outputs, y)`, `torch.cat([a, b])`: differentiable in a graph-carrying argument
            return True if any(self.carries(a.value, order, conds, depth + 1) is True for a in call.args) else None
        if name is not None and DIFFERENTIABLE_COLLECTIVE.match(name) and call.args and call.args[0].keyword is None:
            return self.carries(call.args[0].value, order, conds, depth + 1)  # `hvd.allreduce(loss.cpu())`
        called = method(call)
        if called is not None:
            if called[1] in _DETACHING:
                return False
            if called[1] in _KEEPING:
                return self.carries(called[0], order, conds, depth + 1)
        if name in _PLAIN:
            return False
        if name is not None and module_name(name) in self.modules:
            return True  # the trained model's own forward
        returned = self._returned(call, order, conds, depth)
        if returned is not None:
            return returned
        imported = self.project.summary(call, self.roles) if self.project is not None else None
        if imported is not None and imported.facts.returns_graph and any(
                self.carries(a.value, order, conds, depth + 1) or module_name(dotted(a.value) or "") in self.modules
                for a in call.args):
            self.sources.append(imported.where)
            return True  # a loss function of another module, handed the model or its outputs
        if imported is not None and imported.facts.graph_from:
            from loopcheck.project import arguments

            passed = arguments(call, imported.facts)
            position = imported.facts.graph_from[0]
            if position in passed and self.carries(passed[position], order, conds, depth + 1) is True:
                self.sources.append(imported.where)
                return True  # another module's function computing differentiably from a graph-carrying argument
        return None

    def _derived(self, call: cst.Call, position: int, backpropagated: Callable[[int], bool]) -> bool | None:
        """Element ``position`` of what another module's function returns holds a graph where the
        element computed from it alone is back-propagated (``loss, parts = loss_fn(out, y)`` with
        ``loss = sum(parts.values())`` there and ``loss.backward()`` here)."""
        imported = self.project.summary(call, self.roles) if self.project is not None else None
        if imported is None:
            return None
        if any(b == position and backpropagated(a) for a, b in imported.facts.derived):
            self.sources.append(imported.where)
            return True
        return None

    def _name(self, name: str, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...],
              depth: int) -> bool | None:
        assignment = self.binding(name, order, conds)
        if assignment is None:
            if isinstance(expr, cst.Attribute):  # `outputs.loss`: follow `outputs`
                return self.carries(expr.value, order, conds, depth + 1)
            return None
        key = (name, id(assignment))
        if key not in self.memo:
            self.memo[key] = None  # read again while being followed: unknown
            self.memo[key] = self._bound(name, assignment, depth)
        return self.memo[key]

    def _bound(self, name: str, assignment: Assignment, depth: int) -> bool | None:
        if assignment.op == "for":
            return self._iterated(name, assignment, depth)
        if any(c.kind == "no_grad" for c in assignment.contexts):
            return False
        if any(n == name and a is assignment for n, a in self.backpropagated):
            return True
        if any(n == name and a is assignment for n, _, a, _ in self.backpropagated_items):
            return True  # a dict of losses whose item is back-propagated
        if self.scaled_into_backward(name, assignment):
            return True
        if assignment.op != "=" or len(assignment.names) != 1:
            if assignment.op == "=" and isinstance(assignment.value, cst.Call):
                position = target_position(assignment.node, name)
                if position is not None and self._own_function(assignment.value) is not None:
                    # `loss, parts = compute_loss(out, y)`: what that element of the helper's return holds
                    return self._returned(assignment.value, assignment.order, assignment.conds, depth, position)
                if position is not None and self._derived(assignment.value, position, lambda a: any(
                        a == target_position(assignment.node, n) and b is assignment for n, b in self.backpropagated)):
                    return True
                if position is not None and self.project is not None and position in self.project.returned_numbers(
                        assignment.value, self.roles):
                    return False  # `loss, logged = model(x)` where the project's forward returns `loss.item()` there
                if position is not None and forward_returns_number(self.module, self.roles, assignment.value, position):
                    return False  # `action, value = agent(s)`: this file's forward returns `action.numpy()[0]` there
                if position is not None and _ACCURACY.search(last_part(name)):
                    # `loss, kl_div, wacc, tacc = model(batch)`: an accuracy is counted through argmax and
                    # comparisons, which no graph differentiates, whatever the forward hands it back as
                    return None
                # `logits, loss = helper(x, y)`: each element of what it computes from the model carries the graph
                return True if self._call(assignment.value, assignment.order, assignment.conds, depth) else None
            return None
        if isinstance(assignment.value, cst.List) and not assignment.value.elements:
            return self._filled(name, assignment, depth)
        return self.carries(assignment.value, assignment.order, assignment.conds, depth + 1)

    def scaled_into_backward(self, name: str, assignment: Assignment) -> bool:
        """``loss`` rebound to ``loss / N`` (or ``loss * w``) later in the iteration, and that binding
        handed to backward (``avg += loss`` between the two): the value back-propagated is this one
        divided by a number, so this one carries the graph too."""
        for n, later in self.backpropagated:
            if n != name or later is None or later is assignment or later.op != "=" or later.names != (name,):
                continue
            value = later.value
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Divide, cst.Multiply)) \
                    and dotted(value.left) == name and name not in names_in(value.right) \
                    and self.binding(name, later.order, later.conds) is assignment:
                return True
        return False

    def _filled(self, name: str, assignment: Assignment, depth: int) -> bool | None:
        """``picked = []`` then ``picked.append(scores[i])``: the list holds a graph where what is
        appended to this binding of it does (``torch.stack(picked)`` then carries it on)."""
        for store in self.loop.events(Kind.STORE):
            call = store.node
            if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
                    and store.value is not None and dotted(call.func.value) == name and not store.in_context("no_grad")
                    and self.binding(name, store.order, store.conds) is assignment
                    and self.carries(store.value, store.order, store.conds, depth + 1) is True):
                return True
        return None

    def _iterated(self, name: str, assignment: Assignment, depth: int) -> bool | None:
        """``for key, value in parts.items()`` / ``for value in parts.values()``: the values carry a
        graph where the container holds graph-carrying tensors."""
        iterated = assignment.value
        called = method(iterated) if isinstance(iterated, cst.Call) and not iterated.args else None
        if called is None or not (called[1] == "items" and assignment.names[1:] == (name,) and len(assignment.names) == 2
                                  or called[1] == "values" and assignment.names == (name,)):
            return None
        return True if self.carries(called[0], assignment.order, assignment.conds, depth + 1) is True else None

    def _own_function(self, call: cst.Call) -> cst.FunctionDef | None:
        """The one function of this file that ``fn(...)`` / ``self.fn(...)`` calls."""
        name = own_call_name(call)
        candidates = self.functions.get(name, []) if name is not None else []
        if len(candidates) != 1:
            return None
        params = candidates[0].params.params
        is_method = bool(params) and params[0].name.value == "self"
        return candidates[0] if is_method == isinstance(call.func, cst.Attribute) else None

    def _returned(self, call: cst.Call, order: int, conds: tuple[Cond, ...], depth: int,
                  position: int | None = None) -> bool | None:
        """Whether what a same-file function returns (or element ``position`` of it) holds a graph."""
        function = self._own_function(call)
        if function is None or depth > _DEPTH:
            return None
        return _Callee(self, function, call, order, conds).returns(position, depth + 1)


class _Callee(GraphReader):
    """A function of the same file, read with what one call passes in: its names are its own
    bindings, its parameters are the caller's arguments."""

    def __init__(self, caller: GraphReader, function: cst.FunctionDef, call: cst.Call, order: int,
                 conds: tuple[Cond, ...]) -> None:
        self.__dict__.update(caller.__dict__)
        self.caller, self.order, self.conds = caller, order, conds
        self.backpropagated, self.backpropagated_items = [], []
        params = [p.name.value for p in function.params.params if p.name.value != "self"]
        self.arguments = dict(zip(params, positional(call)))
        self.arguments.update({a.keyword.value: a.value for a in call.args
                               if a.keyword is not None and a.keyword.value in params})
        scan = self.scans.get(function)
        if scan is None:
            scan = self.scans[function] = _Scan(function)
        self.bound, self.results, self.opaque = scan.bound, scan.results, scan.opaque
        self.backpropagated_names = scan.backpropagated
        self.memo = {}

    def returns(self, position: int | None, depth: int) -> bool | None:
        """True when every ``return`` hands back a graph (in element ``position`` of a tuple)."""
        if self.opaque or not self.results:
            return None
        found = [self._element(r, position, depth) if r is not None else False for r in self.results]
        return True if all(f is True for f in found) else None

    def _element(self, value: cst.BaseExpression, position: int | None, depth: int) -> bool | None:
        if position is None:
            return self.carries(value, self.order, self.conds, depth + 1)
        if isinstance(value, cst.Tuple):
            elements = value.elements
            if position < len(elements) and not isinstance(elements[position], cst.StarredElement):
                return self.carries(elements[position].value, self.order, self.conds, depth + 1)
            return None
        if isinstance(value, cst.Call) and self._own_function(value) is not None:
            return self._returned(value, self.order, self.conds, depth, position)
        if isinstance(value, cst.Call) and self._derived(value, position, lambda a: self._backpropagated(value, a)):
            return True
        if isinstance(value, cst.Call):
            return True if self._call(value, self.order, self.conds, depth) else None
        return None

    def _backpropagated(self, value: cst.BaseExpression, position: int) -> bool:
        """The name bound to element ``position`` of ``value`` (and bound nowhere else in the
        function) is back-propagated there."""
        names = [n for n, bindings in self.bound.items()
                 if any(v is value and p == position for v, p, _ in bindings)]
        return len(names) == 1 and len(self.bound[names[0]]) == 1 and names[0] in self.backpropagated_names

    def _name(self, name: str, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...],
              depth: int) -> bool | None:
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = None  # a name read again while it is being followed (`x = x.to(device)`): unknown
        self.memo[name] = found = self._followed(name, expr, order, conds, depth)
        return found

    def _followed(self, name: str, expr: cst.BaseExpression, order: int, conds: tuple[Cond, ...],
                  depth: int) -> bool | None:
        bindings = self.bound.get(name)
        if bindings is None:
            if name in self.arguments:
                return self.caller.carries(self.arguments[name], self.order, self.conds, depth + 1)
            if isinstance(expr, cst.Attribute):
                return self.carries(expr.value, order, conds, depth + 1)
            return None
        found = [None if value is None else self._element(value, position, depth + 1)
                 for value, position, augmented in bindings if not augmented]
        if any(augmented and value is not None and self.carries(value, order, conds, depth + 1) is True
               for value, _, augmented in bindings):
            return True  # `loss += F.l1_loss(out, y)`
        return True if found and all(f is True for f in found) else None

    def _call(self, call: cst.Call, order: int, conds: tuple[Cond, ...], depth: int) -> bool | None:
        called = call.func.value if isinstance(call.func, cst.Name) else None
        if called in self.arguments and called not in self.bound:
            handed = dotted(self.arguments[called])  # `model(x)` with the trained model passed in
            if handed is not None and module_name(handed) in self.modules:
                return True
        return super()._call(call, order, conds, depth)


class _Scan:
    """What a function binds and returns, read once per file."""

    def __init__(self, function: cst.FunctionDef) -> None:
        # name -> (value, element of a tuple target or None, augmented `+=`)
        self.bound: dict[str, list[tuple[cst.BaseExpression | None, int | None, bool]]] = {}
        self.results: list[cst.BaseExpression | None] = []
        self.backpropagated: set[str] = set()  # names `.backward()` runs on (`scaler.scale(loss).backward()`)
        self.opaque = any(_NO_GRAD.search(source(d.decorator)) for d in function.decorators)
        for node in walk(function.body):
            if isinstance(node, cst.With):
                self.opaque |= any(_NO_GRAD.search(source(item.item)) for item in node.items)
                for item in node.items:
                    if item.asname is not None:
                        self._unknown(item.asname.name)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind(target.target, node.value)
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, cst.AugAssign) and dotted(node.target):
                self.bound.setdefault(dotted(node.target), []).append(  # type: ignore[arg-type]
                    (node.value, None, True) if isinstance(node.operator, cst.AddAssign) else (None, None, False))
            elif isinstance(node, (cst.For, cst.CompFor)):
                self._unknown(node.target)
            elif isinstance(node, cst.Return):
                self.results.append(node.value)
            elif isinstance(node, cst.Call) and (called := method(node)) is not None and called[1] == "backward":
                loss = called[0]
                scaled = method(loss) if isinstance(loss, cst.Call) else None
                if scaled is not None and scaled[1] == "scale" and len(loss.args) == 1:  # type: ignore[attr-defined]
                    loss = loss.args[0].value  # type: ignore[attr-defined]
                self.backpropagated.update(_loss_names(loss))

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                name = dotted(element.value)
                if name is None or isinstance(element, cst.StarredElement):
                    self._unknown(element.value)
                else:
                    self.bound.setdefault(name, []).append((value, position, False))
        elif dotted(target):
            self.bound.setdefault(dotted(target), []).append((value, None, False))  # type: ignore[arg-type]

    def _unknown(self, target: cst.BaseExpression) -> None:
        for name in target_names(target):
            self.bound.setdefault(name, []).append((None, None, False))


_NO_GRAD = Pattern(r"\b(no_grad|inference_mode)\b")
# `enctime`, `fwd_time`, `elapsed`, `duration_ms`: how long a part of the forward took (not `time_emb`)
_TIMING = Pattern(r"time$|elapsed|duration", re.I)
# `acc`, `wacc`, `top1_acc`, `accuracy`, `n_correct`: a share or count of right predictions
_ACCURACY = Pattern(r"acc(?:uracy|s)?$|^acc_|correct", re.I)


def target_position(node: cst.CSTNode, name: str) -> int | None:
    """Where ``name`` sits in the flat tuple target of ``a, name = ...``."""
    if not isinstance(node, cst.Assign) or len(node.targets) != 1:
        return None
    target = node.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    names = [dotted(e.value) if not isinstance(e, cst.StarredElement) else None for e in target.elements]
    return names.index(name) if name in names and names.count(name) == 1 else None


def _items_rebound(loop: cst.CSTNode, name: str) -> bool:
    """The loop stores into the dict by a key it computes (``loss_dict[key] = value.item()`` over its
    items): which of its values still hold a graph is then not known. A literal key
    (``loss["loss"] = a + b``) binds that one item, read as any other."""
    for node in walk(loop):
        if type(node) is cst.Assign and any(
                type(t.target) is cst.Subscript and dotted(t.target.value) == name and _keyed_item(t.target) is None
                for t in node.targets):
            return True
    return False


def _keyed_item(expr: cst.BaseExpression | None) -> tuple[str, str] | None:
    """(``loss``, ``total``) for ``loss["total"]`` (also ``loss["total"].mean()``): an item of a dict
    of losses, by a literal key."""
    while isinstance(expr, cst.Call) and not expr.args and method(expr) is not None \
            and method(expr)[1] in _KEEPING:  # type: ignore[index]
        expr = method(expr)[0]  # type: ignore[index]
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key, name = expr.slice[0].slice.value, dotted(expr.value)
    text = key.evaluated_value if isinstance(key, cst.SimpleString) else None
    return (name, text) if name is not None and isinstance(text, str) else None


_COUNT_KEY = Pattern(r"^(?:n|num|nb)_|^n(?:items|tokens|toks|words|samples|sents)$|(?:^|_)counts?$", re.I)


def _counted(expr: cst.Subscript) -> bool:
    """``out["n_items"]``, ``out[tid]["num_tokens"]``: an item whose literal key names a count."""
    if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return False
    key = expr.slice[0].slice.value  # type: ignore[attr-defined]
    return type(key) is cst.SimpleString and isinstance(key.evaluated_value, str) \
        and _COUNT_KEY.search(key.evaluated_value) is not None


def _loss_names(loss: cst.BaseExpression | None) -> list[str]:
    """``loss`` for ``loss``, ``loss / N``, ``loss.mean()``, ``scaler.scale(loss)``: the names whose
    graph backward runs."""
    if loss is None:
        return []
    name = dotted(loss)
    if name is not None:
        return [name]
    if isinstance(loss, cst.BinaryOperation):
        return _loss_names(loss.left) + _loss_names(loss.right)
    if isinstance(loss, cst.Call):
        called = method(loss)
        if called is not None and called[1] in _KEEPING:
            return _loss_names(called[0])
        if called is not None and called[1] == "scale" and len(loss.args) == 1 and loss.args[0].keyword is None:
            return _loss_names(loss.args[0].value)  # `(scaler.scale(loss) + aux).backward()`
    return []
