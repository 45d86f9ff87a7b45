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

from loopcheck.model.syntax import dotted, func_name, last_part, param_names, walk

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
    ``self.attr``, for each plain name the file builds once from a class of the file or of a project
    module it imports (``d_net = distiller.Distiller(t_net, s_net)``: ``d_net.s_net`` -> ``s_net``)."""
    found: dict[str, str] = {}
    for name, init, call in _built_once(model):
        kept = stored_whole(init)
        for attr, value in _arguments(init, call).items():
            if attr in kept and (passed := dotted(value)) is not None:
                found[f"{name}.{last_part(kept[attr])}"] = passed
    return found


def own_optimizers(model: FileModel) -> set[str]:
    """``architect.optimizer`` where ``architect = Architect(model, args)`` is built once from a class
    (of the file or of a project module) whose ``__init__`` builds ``self.optimizer`` by an optimizer
    constructor (DARTS's Adam over the architecture parameters): an optimizer of that object's own."""
    from loopcheck.model.roles import Role, role_of_constructor

    found: set[str] = set()
    for name, init, _ in _built_once(model):
        for node in walk(init.body):
            if type(node) is cst.Assign and len(node.targets) == 1 and type(node.value) is cst.Call:  # type: ignore[attr-defined]
                target = dotted(node.targets[0].target)  # type: ignore[attr-defined]
                if target and target.startswith("self.") and target.count(".") == 1 \
                        and role_of_constructor(func_name(node.value) or "") is Role.OPTIMIZER:  # type: ignore[attr-defined]
                    found.add(f"{name}.{last_part(target)}")
    return found


def _built_once(model: FileModel) -> Iterator[tuple[str, cst.FunctionDef, cst.Call]]:
    """Each plain name the file builds once from a class of the file or of a project module it imports,
    with that class's ``__init__`` and the call."""
    classes: dict[str, cst.ClassDef] | None = None
    for name, calls in model.index.roles.constructed.items():
        if len(calls) != 1 or len(model.index.values.get(name, ())) != 1:
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
            yield name, init, calls[0]


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
