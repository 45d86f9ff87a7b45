"""Parameters a class's ``__init__`` stores whole on the object, and what that makes its attributes.

``Distiller(t_net, s_net)`` whose ``__init__`` keeps ``self.s_net = s_net``: ``d_net.s_net`` is the
module ``s_net`` itself, so ``d_net.s_net.train()`` switches ``s_net``.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module(
...     "class D:\\n    def __init__(self, t, s):\\n        self.s_net = s\\n\\nd = D(teacher, student)\\n"))
>>> attribute_aliases(m)
{'d.s_net': 'student'}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.memory import module_name
from loopcheck.model.syntax import dotted, func_name, last_part, param_names, source, walk

if TYPE_CHECKING:
    from loopcheck.model import FileModel


def stored_whole(init: cst.FunctionDef) -> dict[str, str]:
    """Parameter -> the attribute (``self.discriminator``) an ``__init__`` assigns it to as it is."""
    params = param_names(init.params)
    kept: dict[str, str] = {}
    for node in walk(init.body):
        if type(node) is cst.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
            target, value = dotted(node.targets[0].target), dotted(node.value)  # type: ignore[attr-defined]
            if target and target.startswith("self.") and target.count(".") == 1 and value in params:
                kept[value] = target  # type: ignore[index]
    return kept


def attribute_aliases(model: FileModel) -> dict[str, str]:
    """``obj.attr`` -> the name passed for the parameter that ``obj``'s class stores whole as
    ``self.attr``, for each plain name the file builds only from one class of the file or of a project
    module it imports (``d_net = distiller.Distiller(t_net, s_net)``: ``d_net.s_net`` -> ``s_net``;
    built in two functions, both pass the same name for it). Read once per file: rules ask once per leak."""
    known = model.read_once.get("attribute_aliases")
    if known is None:
        known = model.read_once["attribute_aliases"] = _attribute_aliases(model)
    return known  # type: ignore[return-value]


def _attribute_aliases(model: FileModel) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, init, calls in _built(model):
        kept = stored_whole(init)
        passed = [_arguments(init, call) for call in calls]
        for attr in kept:
            names = {dotted(p[attr]) if attr in p else None for p in passed}
            if len(names) == 1 and (one := names.pop()) is not None:
                found[f"{name}.{last_part(kept[attr])}"] = one
    return found


def own_optimizers(model: FileModel) -> set[str]:
    """``architect.optimizer`` where ``architect = Architect(model, args)`` is built once from a class
    (of the file or of a project module) whose ``__init__`` builds ``self.optimizer`` by an optimizer
    constructor (DARTS's Adam over the architecture parameters): an optimizer of that object's own."""
    from loopcheck.model.roles import Role, role_of_constructor

    found: set[str] = set()
    for name, init, _ in _built(model):
        for node in walk(init.body):
            if type(node) is cst.Assign and len(node.targets) == 1 and type(node.value) is cst.Call:  # type: ignore[attr-defined]
                target = dotted(node.targets[0].target)  # type: ignore[attr-defined]
                if target and target.startswith("self.") and target.count(".") == 1 \
                        and role_of_constructor(func_name(node.value) or "") is Role.OPTIMIZER:  # type: ignore[attr-defined]
                    found.add(f"{name}.{last_part(target)}")
    return found


def _built(model: FileModel) -> Iterator[tuple[str, cst.FunctionDef, list[cst.Call]]]:
    """Each plain name the file binds only to objects of one class of the file or of a project module
    it imports (once, or once in each of several functions), with that class's ``__init__`` and the calls."""
    classes: dict[str, cst.ClassDef] | None = None
    for name, calls in model.index.roles.constructed.items():
        # (`explainer = explainer.cuda()` after it moves the same object)
        calls = [c for c in calls if module_name(source(c)) != name]
        if not calls or len(_built_values(model, name)) != len(calls) or len({func_name(c) for c in calls}) != 1:
            continue
        constructor = func_name(calls[0]) or ""
        if not last_part(constructor)[:1].isupper():
            continue
        if classes is None:
            classes = {n.name.value: n for n in model.module.body if isinstance(n, cst.ClassDef)}
        cls = classes.get(constructor) if "." not in constructor else None
        if cls is None and model.project is not None:
            cls = model.project.class_def(constructor)
        init = _init(cls) if cls is not None else None
        if init is not None:
            yield name, init, calls


def _built_values(model: FileModel, name: str) -> list[cst.BaseExpression]:
    """What the file binds ``name`` to, less the moves of the same object (``explainer.cuda()``)."""
    return [v for v in model.index.values.get(name, ()) if not (type(v) is cst.Call and module_name(source(v)) == name)]


def _init(cls: cst.ClassDef) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)


def _arguments(init: cst.FunctionDef, call: cst.Call) -> dict[str, cst.BaseExpression]:
    """Parameter -> argument of ``call`` (positional ones after ``self``, then keywords)."""
    positional = [p.name.value for p in (*init.params.posonly_params, *init.params.params)][1:]
    bound: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return {}  # `Cls(*args)`: which parameter gets what is not visible
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
        elif i < len(positional):
            bound[positional[i]] = arg.value
    return bound
