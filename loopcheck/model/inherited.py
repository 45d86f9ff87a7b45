"""Methods a class inherits from a library base class and calls in its own loop.

Research code often subclasses ``transformers.Trainer`` and copies the library's ``train()`` loop
into the subclass, calling ``tr_loss += self.training_step(model, inputs)`` (transformers 3.0:
``self._training_step(model, inputs, optimizer)``) without overriding that method. The inherited
method runs one micro-batch: ``model.train()``, the forward, the loss divided by
``self.args.gradient_accumulation_steps`` (when above 1; from 4.30 through ``accelerator.backward``,
which divides by the same count) and the backward (through apex, a GradScaler, DeepSpeed or
Accelerate depending on the version and the arguments). No version syncs or skips DDP's all-reduce
there: transformers 4.x skips it in ``train()`` (``with model.no_sync():``, later
``accelerator.accumulate(model)`` or ``accelerator.no_sync``), which is the code the subclass copied.
It returns the loss detached (``loss.detach()``; ``loss.item()`` in 3.0): nothing kept carries a graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Optional

import libcst as cst

from loopcheck.model.syntax import dotted, lines

# The inherited method by the name the loop calls it, and the number of positional arguments its
# call takes (the model first): 3.1+ ``training_step(model, inputs)``, 3.0 ``_training_step(model,
# inputs, optimizer)``.
STEP_METHODS = {"training_step": 2, "_training_step": 3}
TRAINER = "transformers.Trainer"


def trainer_subclass_methods(module: cst.Module, imports: list[cst.Import | cst.ImportFrom],
                             elsewhere: Callable[[str], bool] | None = None) -> set[cst.FunctionDef]:
    """The methods of the file's classes that derive from ``transformers.Trainer`` (directly or through
    classes of this file, or a class of another project module where ``elsewhere(base)`` says that
    one does) where neither the class nor any class of the file between it and ``transformers.Trainer``
    defines ``training_step`` or ``_training_step``. Another base, which may override them: not read."""
    names = trainer_names(_cst_imports(imports))
    if not names and elsewhere is None:
        return set()
    defs = {stmt.name.value: stmt for stmt in module.body if isinstance(stmt, cst.ClassDef)}
    classes = {name: ([dotted(b.value) for b in cls.bases if b.keyword is None], _defines_step(cls))
               for name, cls in defs.items()}
    found: set[cst.FunctionDef] = set()
    for name, cls in defs.items():
        if inherits(name, classes, names, elsewhere):
            found.update(m for m in lines(cls.body) if isinstance(m, cst.FunctionDef))
    return found


# a class by name -> its bases as written (None: not a dotted name) and whether it defines a step method
Classes = Mapping[str, tuple[Sequence[Optional[str]], bool]]


def inherits(name: str, classes: Classes, names: set[str], elsewhere: Callable[[str], bool] | None = None,
             seen: set[str] | None = None) -> bool:
    """The class ``name`` derives from the Trainer with the step methods as the library wrote them."""
    seen = set() if seen is None else seen
    if name in seen or name not in classes:
        return False
    seen.add(name)
    bases, defines = classes[name]
    if defines or len(bases) != 1 or bases[0] is None:
        return False  # a mixin may bring its own training_step
    base = bases[0]
    if base in names:
        return True
    if base in classes:
        return inherits(base, classes, names, elsewhere, seen)
    return elsewhere is not None and elsewhere(base)


def _defines_step(cls: cst.ClassDef) -> bool:
    for stmt in lines(cls.body):
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in STEP_METHODS:
            return True
        if isinstance(stmt, cst.SimpleStatementLine):  # `training_step = other_step`
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and any(
                        isinstance(n, cst.Name) and n.value in STEP_METHODS for n in _assign_targets(small)):
                    return True
    return False


def _assign_targets(small: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    if isinstance(small, cst.AnnAssign):
        return [small.target]
    return [t.target for t in small.targets]


def _cst_imports(imports: list[cst.Import | cst.ImportFrom]) -> Iterator[tuple[str | None, str, str | None]]:
    """(``from`` module or None for ``import``, name, ``as`` name) of every absolute import."""
    for node in imports:
        if isinstance(node, cst.Import):
            for alias in node.names:
                yield None, dotted(alias.name) or "", _as(alias)
        elif not node.relative and node.module is not None and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                yield dotted(node.module), dotted(alias.name) or "", _as(alias)


def _as(alias: cst.ImportAlias) -> str | None:
    return dotted(alias.asname.name) if alias.asname is not None else None  # type: ignore[arg-type]


def trainer_names(imports: Iterable[tuple[str | None, str, str | None]]) -> set[str]:
    """The names a file calls ``transformers.Trainer`` by (``Trainer``, ``HFTrainer``,
    ``transformers.Trainer``), given its imports as (``from`` module or None, name, ``as`` name)."""
    names: set[str] = set()
    for module, name, as_name in imports:
        if module is None and name == "transformers":
            names.add(f"{as_name or 'transformers'}.Trainer")
        elif module in ("transformers", "transformers.trainer") and name == "Trainer":
            names.add(as_name or "Trainer")
    return names


def inherited_step(call: cst.Call, function: cst.FunctionDef | None, methods: set[cst.FunctionDef]
                   ) -> str | None:
    """``self.training_step(model, inputs)`` in a method of such a class: the method's name."""
    if function is None or function not in methods or not isinstance(call.func, cst.Attribute):
        return None
    func = call.func
    if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    name = func.attr.value
    count = STEP_METHODS.get(name)
    if count is None or any(a.star for a in call.args):
        return None
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) + sum(a.keyword is not None for a in call.args) < count - 1 or not positional:
        return None  # the model must come first, as the library's own loop passes it
    return name


def divided_loss(call: cst.Call) -> cst.BaseExpression:
    """The loss the inherited method back-propagates, as the model reads a loss: the call's own result
    divided by the accumulation count (what the method divides its loss by)."""
    count = cst.Attribute(value=cst.Attribute(value=cst.Name("self"), attr=cst.Name("args")),
                          attr=cst.Name("gradient_accumulation_steps"))
    return cst.BinaryOperation(left=call, operator=cst.Divide(), right=count)


def model_argument(call: cst.Call) -> cst.BaseExpression:
    return next(a.value for a in call.args if a.keyword is None)
