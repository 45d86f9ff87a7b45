"""Hand-rolled EMAs: ``self.ema = copy.deepcopy(self.net)``, and whether any code of the file changes them.

An EMA made by copying the trained model is averaged by code of the file: ``for e, p in
zip(ema.parameters(), model.parameters()): e.mul_(d).add_(p, alpha=1 - d)``, ``v *= d; v += (1 - d) *
msd[k]`` over its ``state_dict()``, ``torch._foreach_lerp_(ema_params, params, w)``, or
``ema.load_state_dict(averaged)``. A copy that no code of the file changes in place keeps the weights it
was copied with; an "update" that only rebinds names (``for k, v in ema.state_dict().items(): v = v * d
+ ...``) leaves it as it was.

Only copies named as EMAs are read (a teacher, a target network or a frozen reference model is a copy on
purpose), and any doubt counts as a change: the copy bound twice, handed to code that is not known to only
read it (a function of another module, a helper of the file that changes tensors in place), or reached, in
some function, through a name that code changes in place or assigns into. Names bound from the copy
(``for k, v in self.ema.state_dict().items()``, ``net = self.ema if use_ema else self.net``) are followed
within the function that binds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, last_part, target_names, walk
from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.model import FileModel

_COPIES = {"copy.deepcopy", "deepcopy"}
# in-place methods that change no weight: the copy is frozen, moved, cast or switched to eval
_KEEPS_WEIGHTS = {"requires_grad_", "train", "eval", "to", "cuda", "cpu", "half", "float", "zero_grad", "share_memory_"}
# calls that only read what they are handed (or hand it on to a name bound here, which is followed)
_READERS = {"print", "isinstance", "hasattr", "getattr", "len", "id", "type", "str", "repr", "zip", "list", "dict",
            "tuple", "enumerate", "sorted", "iter", "next", "sum", "copy.deepcopy", "deepcopy", "torch.save"}
# methods of another object that read their arguments: formatting, logging, collecting, saving, copying
# the copy's weights into that object (`model.load_state_dict(ema.state_dict())`)
_READING_METHODS = {"format", "append", "extend", "info", "debug", "warning", "warn", "error", "write",
                    "add_scalar", "add_scalars", "add_histogram", "log", "save", "load_state_dict", "copy_",
                    "set_postfix", "startswith", "endswith", "get"}
# saving, exporting and tracing: `torch.onnx.export(net, ...)`, `torch.jit.trace`, `SaveModelByTrace(net, path)`
_SAVES = Pattern(r"(?i)save|export|checkpoint|trace|script|onnx|^log")
_NO_NAMES: frozenset[str] = frozenset()
# what precedes `deepcopy(` on the line of a candidate: `self.ema = copy.`, `model_ema = `, `ema_model = copy.`
_BOUND_TO_A_COPY = Pattern(r"(?i)(?<![^\W_])ema(?:_\w*)?[ \t]*=[ \t]*(?:copy[ \t]*\.[ \t]*)?$")


def has_copied_ema_text(source: str) -> bool:
    """A line binds an EMA-named name to a deepcopy (reading the module costs walks over it: only files
    with such a line are read). Only the text before each ``deepcopy(`` on its line is searched."""
    start = 0
    while (found := source.find("deepcopy(", start)) >= 0:
        if _BOUND_TO_A_COPY.search(source, source.rfind("\n", 0, found) + 1, found):
            return True
        start = found + 9
    return False


def ema_name(name: str) -> bool:
    """``ema``, ``self.model_ema``, ``net_ema``, ``ema_model``: a ``_``-part of the last name is ``ema``."""
    return "ema" in last_part(name).lower().split("_")


def copies_by_index(model: FileModel) -> list[cst.Call]:
    """The ``deepcopy`` calls bound to an EMA-named name, read off the file's index (no walk): the
    candidates ``copied_emas`` may report, for a cheap test first."""
    return [copy for short, values in model.index.values.items() if ema_name(short)
            for value in values if (copy := _copy(value)) is not None]


def copied_emas(model: FileModel) -> Iterator[tuple[str, cst.Call, cst.Assign | None]]:
    """(name, the ``deepcopy`` call, an update that rebinds instead of changing in place, if any) of each
    EMA-named copy that no code of the file changes."""
    scopes = _scopes(model.module)
    found = [(name, copy, node) for _, nodes in scopes for node in nodes
             if type(node) is cst.Assign and len(node.targets) == 1  # type: ignore[attr-defined]
             and (copy := _copy(node.value)) is not None  # type: ignore[attr-defined]
             and (name := dotted(node.targets[0].target)) is not None and ema_name(name)]  # type: ignore[attr-defined]
    for name, call, binding in found:
        mentioning = [(scope, nodes) for scope, nodes in scopes if any(_names_copy(n, name) for n in nodes)]
        if sum(_names_copy(n, name) for _, nodes in mentioning for n in nodes) < 2:
            continue  # bound, never read
        if not _bound_once(scopes, name, binding):
            continue
        # functions whose code reads the copy: what they return may be its parameters (`self._param_pairs()`)
        readers = frozenset(s.name.value for s, _ in mentioning if type(s) is cst.FunctionDef)  # type: ignore[attr-defined]
        mentions = {id(s) for s, _ in mentioning}
        changes = _InPlace()
        if not any(_changed_in(model, nodes, name, binding, readers, changes) for scope, nodes in scopes
                   if id(scope) in mentions or readers and any(
                       type(n) is cst.Call and last_part(func_name(n) or "") in readers for n in nodes)):  # type: ignore[arg-type]
            yield name, call, next((r for _, nodes in mentioning if (r := _rebinding(nodes, name)) is not None), None)


def _scopes(module: cst.Module) -> list[tuple[cst.CSTNode, list[cst.CSTNode]]]:
    """Each scope (the module, a class body, a function) with its own nodes, every node of the module
    once (a nested function or class is its own scope; lambdas stay with the scope around them)."""
    found: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = []
    todo: list[cst.CSTNode] = [module]
    while todo:
        scope = todo.pop()
        nodes = []
        for n in walk(scope):
            nodes.append(n)
            if n is not scope and type(n) in (cst.FunctionDef, cst.ClassDef):
                todo.append(n)
            elif type(n) is cst.Lambda and n is not scope:
                nodes.extend(walk(n.body))  # type: ignore[attr-defined]
        found.append((scope, nodes))
    return found


def _names_copy(node: cst.CSTNode, name: str) -> bool:
    kind = type(node)
    if kind is cst.Name:
        return node.value == name  # type: ignore[attr-defined]
    return kind is cst.Attribute and node.attr.value == name.rpartition(".")[2] and dotted(node) == name  # type: ignore[attr-defined,arg-type]


class _InPlace(dict):  # type: ignore[type-arg]
    """Per function of the file: whether it changes tensors in place (asked once per function)."""


def _rebinding(nodes: list[cst.CSTNode], name: str) -> cst.Assign | None:
    """``for k, v in self.ema.state_dict().items(): ... v = v * d + (1 - d) * msd[k]``: an update that
    rebinds the loop's name to the averaged value and leaves the tensor it named as it was."""
    reaches = _reacher(name, _NO_NAMES, _NO_NAMES)
    for node in nodes:
        if type(node) is not cst.For or not reaches(node.iter):  # type: ignore[attr-defined]
            continue
        names = set(target_names(node.target))  # type: ignore[attr-defined]
        for inner in walk(node.body):  # type: ignore[attr-defined]
            if type(inner) is cst.Assign and any(type(t.target) is cst.Name and t.target.value in names  # type: ignore[attr-defined]
                                                  for t in inner.targets) and _mentions(inner.value, names):  # type: ignore[attr-defined]
                return inner  # type: ignore[return-value]
    return None


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(type(n) is cst.Name and n.value in names for n in walk(expr))  # type: ignore[attr-defined]


def _copy(value: cst.BaseExpression) -> cst.Call | None:
    """``copy.deepcopy(net)``, also as ``copy.deepcopy(net) if use_ema else None``."""
    if type(value) is cst.IfExp:
        branches = (value.body, value.orelse)  # type: ignore[attr-defined]
        if sum(type(b) is cst.Name and b.value == "None" for b in branches) != 1:  # type: ignore[attr-defined]
            return None
        value = next(b for b in branches if not (type(b) is cst.Name and b.value == "None"))  # type: ignore[attr-defined]
    while type(value) is cst.Call and type(value.func) is cst.Attribute \
            and value.func.attr.value in _KEEPS_WEIGHTS:  # type: ignore[attr-defined]
        value = value.func.value  # type: ignore[attr-defined]  # `copy.deepcopy(model).eval()`, `.to(device)`
    if type(value) is cst.Call and func_name(value) in _COPIES and value.args:  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    return None


def copied_module(call: cst.Call) -> str | None:
    """What ``copy.deepcopy(...)`` copies: ``model``, also through one wrapper call (``de_parallel(model)``)."""
    value = call.args[0].value
    if type(value) is cst.Call and len(value.args) == 1:  # type: ignore[attr-defined]
        value = value.args[0].value  # type: ignore[attr-defined]
    return dotted(value)


def _bound_once(scopes: list[tuple[cst.CSTNode, list[cst.CSTNode]]], name: str, binding: cst.Assign) -> bool:
    for _, nodes in scopes:
        for node in nodes:
            kind = type(node)
            if kind is not cst.Assign and kind is not cst.AugAssign and kind is not cst.AnnAssign and kind is not cst.For \
                    and kind is not cst.WithItem and kind is not cst.Call:
                continue
            if node is binding or kind is cst.Assign and type(node.value) is cst.Name \
                    and node.value.value == "None":  # type: ignore[attr-defined]
                continue  # `self.ema = None` where EMA is off
            targets = [t.target for t in node.targets] if kind is cst.Assign else (  # type: ignore[attr-defined]
                [node.target] if kind in (cst.AugAssign, cst.AnnAssign, cst.For) else  # type: ignore[attr-defined]
                [node.asname.name] if kind is cst.WithItem and node.asname is not None else [])  # type: ignore[attr-defined]
            if any(dotted(t) == name for t in targets) or "." not in name and any(name in target_names(t) for t in targets):
                return False
            if kind is cst.Call and func_name(node) == "setattr" and len(node.args) > 1 \
                    and type(node.args[1].value) is cst.SimpleString \
                    and node.args[1].value.evaluated_value == last_part(name):  # type: ignore[attr-defined]
                return False  # `setattr(self, "ema", ...)`
    return True


def _changed_in(model: FileModel, nodes: list[cst.CSTNode], name: str, binding: cst.Assign,
                readers: frozenset[str], changes: _InPlace) -> bool:
    """Whether the code of one scope (``nodes``: a function, a class body, the module's own statements)
    may change the copy, or lets it out of the file's sight (returns it, stores it in another object)."""
    derived = _derived(nodes, name, readers)
    reaches = _reacher(name, derived, readers)
    for node in nodes:
        kind = type(node)
        if kind in (cst.Return, cst.Yield) and node.value is not None and reaches(node.value):  # type: ignore[attr-defined]
            return True  # handed to the caller, which may average it
        if kind is cst.Assign and node is not binding and reaches(node.value) and any(  # type: ignore[attr-defined]
                type(t.target) is not cst.Name for t in node.targets):  # type: ignore[attr-defined]
            return True  # `trainer.ema = ema`, `models["ema"] = self.ema`: held elsewhere too
        if kind is cst.Call:
            if _changing_call(model, node, reaches, changes):  # type: ignore[arg-type]
                return True
        elif kind is cst.AugAssign and reaches(node.target):  # type: ignore[attr-defined]
            return True  # `v *= d` on a tensor of its state_dict: in place
        elif kind is cst.Assign and node is not binding and any(
                type(t.target) is not cst.Name and dotted(t.target) != name and reaches(t.target)
                for t in node.targets):  # type: ignore[attr-defined]
            return True  # `e.data = ...`, `msd[k] = ...`, `self.ema.decay = ...`
    return False


def _changing_call(model: FileModel, call: cst.Call, reaches: Callable[[cst.CSTNode], bool],
                   changes: _InPlace) -> bool:
    func = call.func
    called = func.attr.value if type(func) is cst.Attribute else last_part(func_name(call) or "")  # type: ignore[attr-defined]
    if type(func) is cst.Attribute and reaches(func.value):  # type: ignore[attr-defined]
        if called == "load_state_dict":
            return not _checkpoint_read(call)  # averaged or copied weights loaded into it
        if called.endswith("_") and not called.startswith("_") and called not in _KEEPS_WEIGHTS:
            return True  # `e.mul_(d)`, `v.copy_(...)`, `p.data.lerp_(...)`
        return called.startswith(("update", "step", "apply", "set_", "register"))
    if not any(reaches(a.value) for a in call.args):
        return False
    name = func_name(call) or ""
    if name in _READERS or type(func) is cst.Attribute and called in _READING_METHODS:
        return False
    function = _own_function(model, name)
    if function is not None and function not in changes:
        changes[function] = _changes_in_place(function)
    if _SAVES.search(last_part(name)) or called.startswith(("log", "print", "eval", "test", "valid")):
        return function is not None and changes[function]  # saving or evaluating, unless the file's own changes
    return function is None or changes[function]


def _own_function(model: FileModel, name: str) -> cst.FunctionDef | None:
    if not name or "." in name and not name.startswith("self."):
        return None
    fns = model.index.functions.get(last_part(name), [])
    return fns[0] if len(fns) == 1 else None


def _changes_in_place(function: cst.FunctionDef | None) -> bool:
    """A function of the file that changes tensors in place (or loads weights, or updates an object):
    handed the copy, it may be its update. None (not a function of the file): no call is known."""
    if function is None:
        return False
    for n in walk(function.body, into_functions=True):
        if type(n) is cst.Call:
            func = n.func  # type: ignore[attr-defined]
            called = func.attr.value if type(func) is cst.Attribute else last_part(func_name(n) or "")  # type: ignore[arg-type]
            if called == "load_state_dict" or called.startswith(("_foreach_", "update")) or called.endswith("_") \
                    and not called.startswith("_") and called not in _KEEPS_WEIGHTS:
                return True
        elif type(n) is cst.AugAssign and type(n.target) is not cst.Name:  # type: ignore[attr-defined]
            return True
    return False


def _derived(nodes: list[cst.CSTNode], name: str, readers: frozenset[str] = frozenset()) -> frozenset[str]:
    """Names the scope binds from the copy or from names so bound."""
    derived: set[str] = set()
    reaches = _reacher(name, derived, readers)
    for _ in range(3):
        before = len(derived)
        for node in nodes:
            kind = type(node)
            if kind is cst.Assign and reaches(node.value):  # type: ignore[attr-defined]
                derived.update(n for t in node.targets for n in target_names(t.target) if "." not in n)  # type: ignore[attr-defined]
            elif kind in (cst.For, cst.CompFor) and reaches(node.iter):  # type: ignore[attr-defined]
                derived.update(n for n in target_names(node.target) if "." not in n)  # type: ignore[attr-defined]
            elif kind is cst.WithItem and node.asname is not None and reaches(node.item):  # type: ignore[attr-defined]
                derived.update(n for n in target_names(node.asname.name) if "." not in n)  # type: ignore[attr-defined]
        if len(derived) == before:
            break
    return frozenset(derived) if derived else _NO_NAMES


# calls whose result holds what their arguments hold (the copy's parameters, zipped or listed)
_GATHERS = {"list", "tuple", "dict", "zip", "sorted", "enumerate", "iter", "reversed", "OrderedDict", "filter"}


def _reacher(name: str, derived: set[str] | frozenset[str],
             readers: frozenset[str] = frozenset()) -> Callable[[cst.CSTNode], bool]:
    """Whether an expression holds the copy's weights: the copy, what its attributes and methods give
    (``ema.module``, ``ema.parameters()``, ``v.data``), a name bound from those, those gathered
    (``zip(ema.parameters(), ...)``, a comprehension over them), or what a function of the file that
    reads the copy returns (``readers``). Not the copy's output (``ema(x)``), nor what other calls
    compute from it (``evaluate(ema, loader)``), nor arithmetic (``v * d``: a new tensor)."""
    prefix = name + "."

    def copy_itself(expr: cst.CSTNode) -> bool:
        kind = type(expr)
        return kind is cst.Name and (expr.value in derived or expr.value == name) or \
            kind is cst.Attribute and dotted(expr) == name  # type: ignore[attr-defined,arg-type]

    def holds(expr: cst.CSTNode | None, depth: int = 0) -> bool:
        if expr is None or depth > 20:
            return False
        kind = type(expr)
        if copy_itself(expr):
            return True
        if kind is cst.Attribute:
            d = dotted(expr)  # type: ignore[arg-type]
            return d is not None and d.startswith(prefix) or holds(expr.value, depth + 1)  # type: ignore[attr-defined]
        if kind is cst.Subscript:
            return holds(expr.value, depth + 1)  # type: ignore[attr-defined]
        if kind is cst.IfExp:
            return holds(expr.body, depth + 1) or holds(expr.orelse, depth + 1)  # type: ignore[attr-defined]
        if kind in (cst.List, cst.Tuple, cst.Set):
            return any(holds(e.value, depth + 1) for e in expr.elements)  # type: ignore[attr-defined]
        if kind is cst.Lambda:
            return any(_names_copy(n, name) or type(n) is cst.Name and n.value in derived  # type: ignore[attr-defined]
                       for n in walk(expr.body))  # type: ignore[attr-defined]  # a hook that reaches it
        if kind in (cst.ListComp, cst.GeneratorExp, cst.SetComp):
            return holds(expr.elt, depth + 1) or holds(expr.for_in.iter, depth + 1)  # type: ignore[attr-defined]
        if kind is cst.Call:
            func = expr.func  # type: ignore[attr-defined]
            if copy_itself(func):
                return False  # `ema(x)`: its output, not its weights
            if type(func) is cst.Attribute:
                return holds(func.value, depth + 1) or func.attr.value in _GATHERS \
                    and any(holds(a.value, depth + 1) for a in expr.args)  # type: ignore[attr-defined]
            called = last_part(func_name(expr) or "")  # type: ignore[arg-type]
            if called in readers:
                return True
            return called in _GATHERS and any(holds(a.value, depth + 1) for a in expr.args)  # type: ignore[attr-defined]
        return False
    return holds


def _checkpoint_read(call: cst.Call) -> bool:
    """``ema.load_state_dict(state_dict["ema"])`` / ``torch.load(path)``: weights restored once from a
    checkpoint, not averaged in."""
    arg = call.args[0].value if call.args else None
    if type(arg) is cst.Subscript and type(arg.value) is cst.Name:  # type: ignore[attr-defined]
        return True
    return type(arg) is cst.Call and last_part(func_name(arg) or "") == "load"  # type: ignore[arg-type]
