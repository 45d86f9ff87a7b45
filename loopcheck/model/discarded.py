"""Training whose result nothing can observe.

A timing or memory benchmark (``for i in range(1000): loss = f(layer(x)); loss.backward();
opt.step()``, then only the elapsed time printed) trains a module the function built for itself and
throws it away: no statement after the loop reads the module, its optimizer or the loss, and inside
the loop the loss only back-propagates. How that training goes (gradients summed, never cleared)
changes nothing anyone sees. Only the plainest shape counts: local names, the loop a statement of the
function's own body (or of a ``try``/``with`` block of it: a memory benchmark's ``try: ... finally:``),
no closure, generator, ``global`` or alias that could carry the module out. Before the loop the
function may read numbers or text of the module (``sum(p.numel() for p in model.parameters())``, an
f-string of ``model.balance``, ``isinstance(model, GPipe)``): taken before any step, they show nothing
of the training, and what they are bound to may be printed after it (torchgpipe's peak-memory
benchmarks, two rounds of forward, backward and step, then only memory figures). A module the function
takes from an object (``net = modul.net``) counts too where every call of it in the loop is handed
only tensors the function makes up (``x = torch.ones(...)``): nothing is trained on data (PaSST's
throughput test, its warm-up and timed rounds two loops, the loss scaled by a GradScaler).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model.syntax import children, param_names, walk
from loopcheck.model.training import TrainingLoop

_OPTIMIZER_USES = frozenset({"step", "zero_grad"})


def result_discarded(training: TrainingLoop, optimizer: str | None) -> bool:
    """Whether ``optimizer``'s training in ``training`` is of a module built in the loop's function whose
    outputs only feed the loss that back-propagates, and which nothing after the loop reads."""
    fn = training.loop.function
    if fn is None or optimizer is None or "." in optimizer or not isinstance(fn.body, cst.IndentedBlock):
        return False
    split = _split(fn.body, training.loop.node)
    if split is None:
        return False
    before, after = split
    values = _bindings(fn)
    module = _module_of(fn, optimizer, values, training.loop.node)
    if module is None:
        return False
    # what the code reads of the module before training it, as numbers or text (`sum(p.numel() for p in
    # model.parameters())`, `f"balance: {model.balance}"`): taken before any step, it shows nothing of
    # how the training goes
    snapshots: set[int] = set()
    counted = _snapshot_bound(before, values, snapshots)
    derived = _derived(values, module, counted)
    names = {module, optimizer, *derived}
    # (another loop after it, the timed rounds after a warm-up, is read with the rest of the function below)
    if any(next(_uses(stmt, names), None) is not None for stmt in after if not isinstance(stmt, (cst.For, cst.While))):
        return False
    parameters = 0
    scaled = _through_scaler(fn)
    for use, parent, assign in _uses(fn.body, names):
        if id(use) in snapshots or id(use) in scaled or isinstance(parent, cst.AssignTarget) \
                or _unpacked_into(use, assign):
            continue
        if use.value == module and isinstance(parent, cst.Attribute) and parent.attr.value == "parameters":
            parameters += 1  # only the optimizer's binding may read them
        elif use.value == optimizer:
            if not (isinstance(parent, cst.Attribute) and parent.attr.value in _OPTIMIZER_USES):
                return False
        elif isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value == "backward":
            continue
        elif assign is not None and _binds(assign, {module}):
            continue  # `net = torch.compile(net)`: the same module under the same name
        elif assign is None or not _binds(assign, derived):
            return False  # the module or what it computed read by anything but the loss
    return parameters == 1


def _through_scaler(fn: cst.FunctionDef) -> set[int]:
    """The ids of the names a GradScaler only back-propagates or steps: ``loss`` in
    ``scaler.scale(loss).backward()``, ``optimizer`` in ``scaler.step(optimizer)``."""
    found: set[int] = set()
    for node in walk(fn.body):
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute:  # type: ignore[attr-defined]
            continue
        called = node.func.attr.value  # type: ignore[attr-defined]
        inner = node.func.value  # type: ignore[attr-defined]
        if called == "backward" and type(inner) is cst.Call and type(inner.func) is cst.Attribute \
                and inner.func.attr.value == "scale":
            node = inner
        elif called not in ("step", "unscale_"):
            continue
        if len(node.args) == 1 and type(node.args[0].value) is cst.Name:  # type: ignore[attr-defined]
            found.add(id(node.args[0].value))  # type: ignore[attr-defined]
    return found


def _split(block: cst.IndentedBlock, loop: cst.CSTNode) -> tuple[list[cst.CSTNode], list[cst.CSTNode]] | None:
    """(the statements before ``loop``, those that may run after it) where ``loop`` is a statement of
    ``block`` or of the body of a ``try`` or ``with`` statement of it, at any depth (a benchmark's
    ``try: ... finally:`` around its measured steps); None where it is elsewhere (a branch, another
    loop: its iterations could run again after it)."""
    statements = list(block.body)
    if loop in statements:
        at = statements.index(loop)
        return statements[:at], statements[at + 1:]
    for at, stmt in enumerate(statements):
        if isinstance(stmt, (cst.Try, cst.With)) and isinstance(stmt.body, cst.IndentedBlock):
            found = _split(stmt.body, loop)
            if found is not None:
                # a handler, `else:` or `finally:` runs after the try's body
                rest: list[cst.CSTNode] = [*stmt.handlers, *filter(None, [stmt.orelse, stmt.finalbody])] \
                    if isinstance(stmt, cst.Try) else []
                return statements[:at] + found[0], found[1] + rest + statements[at + 1:]
    return None


_SNAPSHOTS = frozenset({"sum", "len", "int", "float", "str", "repr", "round", "bool", "isinstance", "format"})
_LITERALS = (cst.Integer, cst.Float, cst.SimpleString)


def _snapshot(node: cst.CSTNode) -> bool:
    """``node`` turns what it reads into a new number, flag or text (a builtin of ``_SNAPSHOTS``, an
    f-string's field) and calls nothing else than those and methods with no arguments but literals
    (``p.storage().size()``, ``model.parameters()``): it cannot keep a reference to the module."""
    if not (isinstance(node, cst.FormattedStringExpression)
            or isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _SNAPSHOTS):
        return False
    stack: list[cst.CSTNode] = list(children(node))
    while stack:
        inner = stack.pop()
        if isinstance(inner, (cst.Lambda, cst.NamedExpr)):
            return False
        if isinstance(inner, cst.Call):
            builtin = isinstance(inner.func, cst.Name) and inner.func.value in _SNAPSHOTS
            if not builtin and not (isinstance(inner.func, cst.Attribute)
                                    and all(isinstance(a.value, _LITERALS) for a in inner.args)):
                return False
        stack.extend(children(inner))
    return True


def _snapshot_bound(before: list[cst.CSTNode], values: dict[str, list[cst.BaseExpression]],
                    snapshots: set[int]) -> set[str]:
    """The names each binding of which is a snapshot taken before the loop (``param_size = sum(...)``);
    the ids of every name read inside a snapshot there go into ``snapshots``."""
    found: dict[str, int] = {}
    stack = list(before)
    while stack:
        node = stack.pop()
        if _snapshot(node):
            snapshots.update(id(n) for n in _names_below(node))
            continue
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and _snapshot(node.value):
            name = node.targets[0].target.value
            found[name] = found.get(name, 0) + 1
        stack.extend(children(node))
    return {name for name, count in found.items() if count == len(values.get(name, []))}


def _unpacked_into(name: cst.Name, assign: cst.Assign | None) -> bool:
    """``name`` is one of the names a tuple assignment ``assign`` binds."""
    return assign is not None and any(
        isinstance(t.target, (cst.Tuple, cst.List)) and any(e.value is name for e in t.target.elements)
        for t in assign.targets)


def _names_below(node: cst.CSTNode) -> Iterator[cst.Name]:
    stack = [node]
    while stack:
        inner = stack.pop()
        if isinstance(inner, cst.Name):
            yield inner
        stack.extend(children(inner))


def _module_of(fn: cst.FunctionDef, optimizer: str, values: dict[str, list[cst.BaseExpression]],
               loop: cst.CSTNode) -> str | None:
    """``M`` of the one binding ``optimizer = torch.optim.X(M.parameters(), ...)`` in ``fn``, where ``M``
    is bound in ``fn`` only, each time by a call (or, where the loop feeds it only tensors the function
    makes up, also taken from an object: ``net = modul.net``), and neither name is a parameter."""
    params = param_names(fn.params)
    bound = values.get(optimizer, [])
    if len(bound) != 1 or optimizer in params or not isinstance(bound[0], cst.Call) or not bound[0].args:
        return None
    first = bound[0].args[0].value
    if not (isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute)
            and first.func.attr.value == "parameters" and isinstance(first.func.value, cst.Name)):
        return None
    module = first.func.value.value
    built = values.get(module, [])
    if module in params or not built:
        return None
    return module if all(isinstance(v, cst.Call) for v in built) or _fed_made_up(loop, module, values) else None


_FACTORIES = frozenset({"ones", "zeros", "full", "empty", "rand", "randn", "randint", "ones_like", "zeros_like",
                        "rand_like", "randn_like"})
_MOVES = frozenset({"cuda", "to", "float", "half", "bfloat16", "requires_grad_"})


def _made_up(value: cst.BaseExpression) -> bool:
    """``torch.ones([b, 1, 128, 998]).cuda()``: a tensor of constants or noise the function makes."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _MOVES:  # type: ignore[attr-defined]
        value = value.func.value  # type: ignore[attr-defined]
    return type(value) is cst.Call and type(value.func) is cst.Attribute \
        and type(value.func.value) is cst.Name and value.func.value.value == "torch" \
        and value.func.attr.value in _FACTORIES  # type: ignore[attr-defined]


def _fed_made_up(loop: cst.CSTNode, module: str, values: dict[str, list[cst.BaseExpression]]) -> bool:
    """Every call of ``module`` in ``loop`` is handed only names the function binds to made-up tensors
    (a throughput test's `x = torch.ones(...)`): no data is trained on, whatever module it is."""
    calls = [n for n in walk(loop) if type(n) is cst.Call and type(n.func) is cst.Name  # type: ignore[attr-defined]
             and n.func.value == module]  # type: ignore[attr-defined]
    return bool(calls) and all(type(a.value) is cst.Name and values.get(a.value.value)
                               and all(_made_up(v) for v in values[a.value.value])
                               for call in calls for a in call.args)  # type: ignore[attr-defined]


def _bindings(fn: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """The values plainly assigned to each name in ``fn``; empty where something could carry a name
    out of it or run its code later (a nested function, lambda, generator, ``global``)."""
    found: dict[str, list[cst.BaseExpression]] = {}
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Global, cst.Nonlocal, cst.FunctionDef, cst.Lambda, cst.Yield)):
            return {}
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(node.value, cst.Call):
                    # `model, B, C, devices = build(devices)`: each name is a part of the call's result
                    for element in target.target.elements:
                        if isinstance(element.value, cst.Name):
                            found.setdefault(element.value.value, []).append(node.value)
        stack.extend(children(node))
    return found


def _derived(values: dict[str, list[cst.BaseExpression]], module: str, snapshots: set[str]) -> set[str]:
    """Names assigned (``values``) from the module's outputs, directly or through each other; not
    ``snapshots``, numbers taken of it before the loop."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, bound in values.items():
            if name not in derived and name != module and name not in snapshots and \
                    any(next(_uses(v, {module, *derived}), None) is not None for v in bound):
                derived.add(name)
                changed = True
    return derived


def _binds(assign: cst.Assign, names: set[str]) -> bool:
    """Every name ``assign`` binds is one of ``names`` (``y_hat, embed = net(x)`` too)."""
    return all(isinstance(t.target, cst.Name) and t.target.value in names
               or isinstance(t.target, (cst.Tuple, cst.List))
               and all(isinstance(e.value, cst.Name) and e.value.value in names for e in t.target.elements)
               for t in assign.targets)


def _uses(node: cst.CSTNode, names: set[str], parent: cst.CSTNode | None = None,
          assign: cst.Assign | None = None) -> Iterator[tuple[cst.Name, cst.CSTNode, cst.Assign | None]]:
    """(name, its parent, the assignment around it) for each ``Name`` of ``names`` below ``node``; an
    attribute's own name (``x.loss``) is not a use of ``loss``."""
    if isinstance(node, cst.Assign):
        assign = node
    for child in children(node):
        if isinstance(child, cst.Name) and child.value in names \
                and not (isinstance(node, cst.Attribute) and node.attr is child):
            yield child, node, assign
        yield from _uses(child, names, node, assign)
