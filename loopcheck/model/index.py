"""File-wide facts gathered in one walk before loops are modelled: which names hold what, which
functions exist and hold training events, which calls, attributes and imports the file has."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import libcst as cst

from loopcheck.model.events import CLIP_FUNCTIONS
from loopcheck.model.iterators import first_batch_of
from loopcheck.model.roles import FOREIGN_FRAMEWORKS, Roles
from loopcheck.model.syntax import dotted, func_name, inner_nodes, last_part, method, target_names


@dataclass
class Index:
    """File-wide facts gathered in one walk before loops are modelled."""

    roles: Roles = field(default_factory=Roles)
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    methods_called: dict[str, set[str]] = field(default_factory=dict)  # receiver short name -> methods
    passed: set[str] = field(default_factory=set)  # names passed as a call argument somewhere
    int_inits: dict[str, set[int | None]] = field(default_factory=dict)  # name -> values of `name = <int>`
    calls: list[cst.Call] = field(default_factory=list)
    values: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # name -> values assigned
    attributes: set[str] = field(default_factory=set)  # every attribute name used (`x.sync_gradients`)
    with_loops: set[cst.FunctionDef | cst.Module] = field(default_factory=set)  # scopes that hold a loop
    # Functions worth inlining at a call site: they hold a training event or call one that does.
    eventful: set[cst.FunctionDef] = field(default_factory=set)
    imports: list[cst.Import | cst.ImportFrom] = field(default_factory=list)
    # per function: receiver name -> methods called on it there (`evaluate(ema)` reads, never updates)
    methods_in: dict[cst.FunctionDef, dict[str, set[str]]] = field(default_factory=dict)
    # the file trains with another framework (PaddlePaddle, JAX, ...) and never imports torch
    foreign: bool = False
    incremented: set[str] = field(default_factory=set)  # short names of `x += ...` targets (`self.n_iter += 1`)
    # "fn(param)" -> what the file's calls of its one function `fn` pass for `param`
    arguments: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    returns: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = field(default_factory=dict)  # what each returns
    # functions an ignite `Engine(...)` calls once per batch (loopcheck.model.ignite)
    process_functions: set[cst.FunctionDef] = field(default_factory=set)
    # ids of the defaults of a dataclass-like class's fields (`steps: int = 1` under `@dataclass`,
    # attrs' `@define`): what the constructor's caller overrides, as a flag's default is
    field_defaults: set[int] = field(default_factory=set)


# Method and function names that can be training events (see Builder._classify).
EVENT_METHODS = {"backward", "manual_backward", "step", "step_update", "zero_grad", "zero_", "update",
                  "update_parameters", "update_model_average", "unscale_", "eval", "train", *CLIP_FUNCTIONS}


def _may_be_event(call: cst.Call) -> bool:
    called = method(call)
    name = called[1] if called else last_part(func_name(call) or "")
    low = name.lower()
    return name in EVENT_METHODS or any(w in low for w in ("backward", "zero_grad", "scaler", "ema")) \
        or name in ("next", "__next__") and first_batch_of(call) is not None \
        or name == "clamp_" and called is not None and (dotted(called[0]) or "").endswith((".grad", ".grad.data"))
    # `def get_batch(): return next(iter(dl))` takes a batch; `p.grad.data.clamp_(-c, c)` clips


def index_module(module: cst.Module) -> Index:
    index = Index()
    # roles follow what names hold and what the file's functions return
    index.roles.values, index.roles.functions, index.roles.returns = index.values, index.functions, index.returns
    index.roles.methods_called = index.methods_called
    calls_by_fn: dict[cst.FunctionDef, set[str]] = {}
    _index_scope(index, module, [module], calls_by_fn)
    roots = import_roots(index.imports)
    if "torch" not in roots and (roots & FOREIGN_FRAMEWORKS or _own_autograd(index, roots)):
        index.foreign = True
        index.with_loops.clear()  # out of scope: no loop of the file is modelled
    # a function is eventful when it calls an eventful function of this file (to a fixpoint, through
    # the callers of each name that becomes eventful: linear where re-scanning every function per
    # round was quadratic in long call chains)
    callers: dict[str, list[cst.FunctionDef]] = {}
    for fn, called in calls_by_fn.items():
        for name in called:
            callers.setdefault(name, []).append(fn)
    todo = [fn.name.value for fn in index.eventful]
    while todo:
        for fn in callers.get(todo.pop(), ()):
            if fn not in index.eventful:
                index.eventful.add(fn)
                todo.append(fn.name.value)
    return index


def _index_scope(index: Index, scope: cst.FunctionDef | cst.Module, stack: list[cst.CSTNode],
                 calls_by_fn: dict[cst.FunctionDef, set[str]]) -> None:
    """Index the nodes on ``stack`` and below, which belong to ``scope`` (the module or a function).
    A nested function's nodes are indexed, as its scope's, where the walk meets it: the nodes come
    in the order of one walk of the module. Leaves hold nothing to index."""
    in_function = type(scope) is cst.FunctionDef
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: isinstance() on libcst's ABCs dominates this loop otherwise
        if kind is cst.FunctionDef:
            index.functions.setdefault(node.name.value, []).append(node)  # type: ignore[attr-defined]
            calls_by_fn[node] = set()  # type: ignore[index]
            _index_scope(index, node, inner_nodes(node), calls_by_fn)  # type: ignore[arg-type]
            continue
        elif kind is cst.For or kind is cst.While:
            index.with_loops.add(scope)
        elif (kind is cst.Assign or kind is cst.AnnAssign) and node.value is not None:  # type: ignore[attr-defined]
            _index_assignment(index, node)  # type: ignore[arg-type]
            if in_function and kind is cst.Assign and any(  # `p.grad = None`: a helper that clears gradients
                    type(t.target) is cst.Attribute and t.target.attr.value == "grad" for t in node.targets):  # type: ignore[attr-defined]
                index.eventful.add(scope)
        elif kind is cst.ClassDef and node.decorators:  # type: ignore[attr-defined]
            _index_fields(index, node)  # type: ignore[arg-type]
        elif kind is cst.Attribute:
            index.attributes.add(node.attr.value)  # type: ignore[attr-defined]
        elif kind is cst.AugAssign:
            target = dotted(node.target)  # type: ignore[attr-defined]
            if target:
                index.incremented.add(last_part(target))
        elif kind is cst.Import or kind is cst.ImportFrom:
            index.imports.append(node)  # type: ignore[arg-type]
        elif kind is cst.Return and in_function:
            index.returns.setdefault(scope, []).append(node.value)  # type: ignore[arg-type, attr-defined]
        elif kind is cst.Call:
            _index_call(index, node)
            if in_function:
                called = method(node)
                base = dotted(called[0]) if called is not None else None
                if base is not None:
                    index.methods_in.setdefault(scope, {}).setdefault(base, set()).add(called[1])  # type: ignore[index]
                if _may_be_event(node):
                    index.eventful.add(scope)
                callee = node.func.attr.value if type(node.func) is cst.Attribute else dotted(node.func)
                if callee:
                    calls_by_fn[scope].add(callee)
        stack.extend(inner_nodes(node))


# decorators that make a class's annotated attributes constructor parameters
_FIELD_CLASS_DECORATORS = {"dataclass", "define", "frozen", "mutable", "s", "attrs"}


def _index_fields(index: Index, node: cst.ClassDef) -> None:
    if not any(last_part(func_name(d.decorator) if isinstance(d.decorator, cst.Call) else dotted(d.decorator) or "")
               in _FIELD_CLASS_DECORATORS for d in node.decorators) or not isinstance(node.body, cst.IndentedBlock):
        return
    for stmt in node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and small.value is not None:
                    index.field_defaults.add(id(small.value))


def _index_assignment(index: Index, node: cst.Assign | cst.AnnAssign) -> None:
    value = node.value
    assert value is not None
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    for target in targets:
        names = target_names(target)
        if not names and isinstance(target, cst.Subscript) and dotted(target.value):
            # `lr_schedulers[i] = accelerator.prepare(lr_schedulers[i])`: an element of a prepared list
            names = [dotted(target.value)]  # type: ignore[list-item]
            index.roles.record(names, value)
            continue
        index.roles.record(names, value)
        if len(names) > 1 and type(value) is cst.Call and len(names) == len(target.elements):  # type: ignore[attr-defined]
            index.roles.record_unpacked(names, value)  # `model, optimizer = build(...)`
        if len(names) == 1:
            _index_value(index, names[0], value)
        elif type(target) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List) \
                and len(target.elements) == len(value.elements) == len(names) \
                and not any(type(e) is cst.StarredElement for e in (*target.elements, *value.elements)):  # type: ignore[attr-defined]
            # `global_step, train_losses = 0, deque(maxlen=128)`: each name bound to its own element
            for name, element in zip(names, value.elements):  # type: ignore[attr-defined]
                _index_value(index, name, element.value)


def _index_value(index: Index, name: str, value: cst.BaseExpression) -> None:
    short = last_part(name)
    index.values.setdefault(short, []).append(value)
    index.int_inits.setdefault(short, set()).add(
        int(value.value, 0) if type(value) is cst.Integer else None)  # type: ignore[attr-defined]


def _index_call(index: Index, node: cst.Call) -> None:
    index.calls.append(node)
    called = method(node)
    if called is not None:
        name = dotted(called[0])
        if name:
            index.methods_called.setdefault(last_part(name), set()).add(called[1])
    for arg in node.args:
        name = dotted(arg.value)
        if name:
            index.passed.add(last_part(name))


# What a file may import and still train with nothing but its own autograd: Python's own modules, numpy
_PLAIN = frozenset(getattr(sys, "stdlib_module_names", (  # Python 3.9 has no list of them
    "__future__", "argparse", "collections", "dataclasses", "functools", "itertools", "json", "math", "os",
    "random", "sys", "time", "typing"))) | {"numpy"}


def _own_autograd(index: Index, roots: set[str]) -> bool:
    """The file defines ``backward`` itself and imports nothing but Python's own modules and numpy (no
    module of its project either): autograd written by hand (a micrograd ``Value``, numpy layers), not
    torch's."""
    return "backward" in index.functions and roots <= _PLAIN \
        and not any(type(node) is cst.ImportFrom and node.relative for node in index.imports)


def import_roots(imports: list[cst.Import | cst.ImportFrom]) -> set[str]:
    roots: set[str] = set()
    for node in imports:
        if isinstance(node, cst.Import):
            roots.update((dotted(a.name) or "").split(".", 1)[0] for a in node.names)  # type: ignore[arg-type]
        elif node.module is not None and not node.relative:
            roots.add((dotted(node.module) or "").split(".", 1)[0])
    return roots
