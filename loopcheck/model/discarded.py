"""Training whose result nothing can observe.

A timing or memory benchmark (``for i in range(1000): loss = f(layer(x)); loss.backward();
opt.step()``, then only the elapsed time printed) trains a module the function built for itself and
throws it away: no statement after the loop reads the module, its optimizer or the loss, and inside
the loop the loss only back-propagates. How that training goes (gradients summed, never cleared)
changes nothing anyone sees. Only the plainest shape counts: local names, the loop a statement of the
function's own body, no closure, generator, ``global`` or alias that could carry the module out.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model.syntax import children, param_names
from loopcheck.model.training import TrainingLoop

_OPTIMIZER_USES = frozenset({"step", "zero_grad"})


def result_discarded(training: TrainingLoop, optimizer: str | None) -> bool:
    """Whether ``optimizer``'s training in ``training`` is of a module built in the loop's function whose
    outputs only feed the loss that back-propagates, and which nothing after the loop reads."""
    fn = training.loop.function
    if fn is None or optimizer is None or "." in optimizer or not isinstance(fn.body, cst.IndentedBlock):
        return False
    statements = list(fn.body.body)
    if training.loop.node not in statements:
        return False
    values = _bindings(fn)
    module = _module_of(fn, optimizer, values)
    if module is None:
        return False
    derived = _derived(values, module)
    after = statements[statements.index(training.loop.node) + 1:]
    names = {module, optimizer, *derived}
    if any(next(_uses(stmt, names), None) is not None for stmt in after):
        return False
    parameters = 0
    for use, parent, assign in _uses(fn.body, names):
        if isinstance(parent, cst.AssignTarget):
            continue
        if use.value == module and isinstance(parent, cst.Attribute) and parent.attr.value == "parameters":
            parameters += 1  # only the optimizer's binding may read them
        elif use.value == optimizer:
            if not (isinstance(parent, cst.Attribute) and parent.attr.value in _OPTIMIZER_USES):
                return False
        elif isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value == "backward":
            continue
        elif assign is None or not _binds(assign, derived):
            return False  # the module or what it computed read by anything but the loss
    return parameters == 1


def _module_of(fn: cst.FunctionDef, optimizer: str, values: dict[str, list[cst.BaseExpression]]) -> str | None:
    """``M`` of the one binding ``optimizer = torch.optim.X(M.parameters(), ...)`` in ``fn``, where ``M``
    is bound in ``fn`` only, each time by a call, and neither name is a parameter."""
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
    if module in params or not built or not all(isinstance(v, cst.Call) for v in built):
        return None
    return module


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
        stack.extend(children(node))
    return found


def _derived(values: dict[str, list[cst.BaseExpression]], module: str) -> set[str]:
    """Names assigned (``values``) from the module's outputs, directly or through each other."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, bound in values.items():
            if name not in derived and name != module and \
                    any(next(_uses(v, {module, *derived}), None) is not None for v in bound):
                derived.add(name)
                changed = True
    return derived


def _binds(assign: cst.Assign, names: set[str]) -> bool:
    return all(isinstance(t.target, cst.Name) and t.target.value in names for t in assign.targets)


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
