"""## What it does
Checks for an EMA / averaged model (`AveragedModel`, timm `ModelEma*`, `ema_pytorch.EMA`,
`torch_ema.ExponentialMovingAverage`) that a training file creates but never updates. One
constructed with a decay of 0 (`EMA(0)`) copies the weights on every update: it is a store for them
(a backup while the averaged weights are evaluated), not an average, and is left alone; so is one
built from literals alone (`averager = EMA()`, `EMA(0.99)`): it is handed no model, so it smooths
values it is fed later (`losses = averager(losses)`), not weights. Nor is a temporary EMA whose
state another EMA of the file loads (`ema_unet.load_state_dict(load_model.state_dict())`, the
diffusers scripts' resume path): the other one is the EMA the loop must update. Nor is an EMA restored
from a checkpoint around a model the file trains nothing of (a linear probe reading a trained EMA's
features), nor one kept in a container the loop updates it through (`model_emas.append((ema, decay))`,
then `for ema, _ in model_emas: ema.update(model)`), nor one a function that runs no training loop
builds and fills from a checkpoint (an inference loader's `tmp_ema.load_state_dict(...)`, then
`tmp_ema.copy_to(model.parameters())`). Nor is one that hooks itself onto something that
runs every step (`ema.add_to_optimizer_post_step_hook(optimizer)`, ema_pytorch's: the optimizer's
`step()` then calls `ema.update()`).

A hand-rolled EMA, a copy of the trained model named as one (`self.ema = copy.deepcopy(self.net)`,
`model_ema = copy.deepcopy(model).eval()`), is flagged when no code of the file changes it in place: no
`e.mul_(d).add_(p)` or `v *= d` on its parameters or `state_dict()` values, no `torch._foreach_*` call,
no `.data` assigned, no `load_state_dict` of other than a checkpoint's entry, and it is handed to no
code that may change it (another module's updater, a helper of the file that changes tensors in place).
An update that rebinds the loop's name (`for k, v in ema.state_dict().items(): v = v * d + ...`)
changes nothing, and the finding points at it. Copies that are no averages (a distillation teacher, a
target network, a frozen reference model) are not named as EMAs and are left alone.

## Why is this bad?
The EMA keeps the weights it was created with. It is often what gets evaluated and saved as
"the best model": the job reports and ships an untrained network, and nothing fails.

## Fix
Update it once per optimizer step, after `optimizer.step()`: `ema.update(model)` /
`ema_model.update_parameters(model)`; for a copy, change its tensors in place
(`for e, p in zip(ema.parameters(), model.parameters()): e.mul_(d).add_(p.detach(), alpha=1 - d)`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Kind, Role
from loopcheck.model.memory import module_name, trained_modules
from loopcheck.model.roles import role_of_constructor
from loopcheck.model.weight_copies import copied_emas, copied_module, copies_by_index, has_copied_ema_text
from loopcheck.model.syntax import calls, dotted, func_name, is_zero, keyword, last_part, names_in, target_names, walk
from loopcheck.patterns import Pattern
from loopcheck.rules._base import Rule, Violation

_UPDATES = {"update", "update_parameters", "step", "update_model_average", "update_ema", "ema_update", "apply"}
# Library calls handed a model that wrap it or read, save or restore its weights, never averaging them:
# `torch.compile(ema)`, `accelerator.prepare(ema)`, timm's `CheckpointSaver(model_ema=...)` and
# `distribute_bn(model_ema, ...)` (which all-reduces BatchNorm statistics).
_LEAVE_AVERAGE = {"torch.compile", "accelerator.prepare", "CheckpointSaver", "distribute_bn", "unwrap_model",
                  "get_state_dict", "copy.deepcopy", "deepcopy"}
# Checkpoint helpers (`load_checkpoint(model_ema, path)`, `resume_checkpoint`, `load_resume_state_dict`,
# `save_checkpoint`): they restore or save the weights, once, outside the steps.
_CHECKPOINT = Pattern(r"^(load|save|resume|restore)_|checkpoint", re.I)


def _only_read_by_helpers(model: FileModel, name: str) -> bool:
    """Every call that receives ``name`` is a function of this file that never updates it."""
    bound = model.roles.full_names.get(name, set())
    for call in model.index.calls:
        for position, arg in enumerate(call.args):
            passed = dotted(arg.value) or ""
            if last_part(passed) != name or "." in passed and passed not in bound and not passed.startswith("self."):
                continue  # `getattr(cfg.ema, "enabled")` reads a setting named like it, not the EMA
            called = func_name(call) or ""
            if called in _LEAVE_AVERAGE or called.endswith(".accelerator.prepare") or \
                    _CHECKPOINT.search(last_part(called)) and called not in model.index.functions:
                continue
            fns = model.index.functions.get(called, [])
            if len(fns) != 1:
                return False  # another module's function, or a method: it may update it
            params = [p.name.value for p in fns[0].params.params]
            param = arg.keyword.value if arg.keyword is not None else (
                params[position] if position < len(params) else None)
            if param is None or model.index.methods_in.get(fns[0], {}).get(param, set()) & _UPDATES \
                    or _changes(fns[0], param) or _called_with_a_model(fns[0], param):
                return False  # `update_ema(ema, model)` that lerps its parameters in place, `ema(model, step)`
    return True


# `model`, `net`, `self.student_net`: an argument that is a network (an EMA called with it averages it)
_NETWORK = Pattern(r"(?:^|_)(?:model|net|network)$", re.I)


def _called_with_a_model(function: cst.FunctionDef, param: str) -> bool:
    """The function calls ``param`` itself, handing it a network: ``ema(model, niter)`` (an EMA whose
    ``__call__`` averages the weights); ``net(x)``, a forward of data, is not that."""
    return any(type(c.func) is cst.Name and c.func.value == param
               and any(_NETWORK.search(last_part(dotted(a.value) or "")) for a in c.args) for c in calls(function))


def _changes(function: cst.FunctionDef, param: str) -> bool:
    """The function changes in place what it reaches from ``param`` (``for e, p in zip(ema.parameters(),
    ...): e.mul_(d).add_(p)``, ``ema.load_state_dict(...)``), or hands it on to a call that may: in-place
    calls on other values (`torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` of a training
    function handed the EMA to pass it over) leave the EMA as it was."""
    derived = {param}
    for node in walk(function.body, into_functions=True):
        if isinstance(node, cst.Assign) and _mentions(node.value, derived):
            derived.update(n for t in node.targets for n in target_names(t.target))
        elif isinstance(node, cst.For) and _mentions(node.iter, derived):
            derived.update(target_names(node.target))
    for node in walk(function.body, into_functions=True):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        called = func.attr.value if isinstance(func, cst.Attribute) else last_part(func_name(node) or "")
        in_place = called == "load_state_dict" or called.startswith("_foreach_") or \
            called.endswith("_") and not called.startswith("_") and called[:-1].isidentifier()
        if in_place and (isinstance(func, cst.Attribute) and _mentions(func.value, derived)
                         or any(_mentions(a.value, derived) for a in node.args)):
            return True
        name = func_name(node) or ""
        if not in_place and name not in _LEAVE_AVERAGE and not _CHECKPOINT.search(last_part(name)) and any(
                (dotted(a.value) or "").split(".", 1)[0].split("[", 1)[0] in derived for a in node.args):
            return True  # handed on
    return False


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names for n in walk(expr))


_PLAIN_BASES = {"object", "Module", "LightningModule"}  # bases that never touch an attribute named like an EMA


def _updated_elsewhere(model: FileModel, name: str, constructor: str) -> bool:
    """Ways the EMA is updated that its method calls do not show: a ``LitEma`` is updated by calling
    it (``self.model_ema(self.model)``); bound to another name or put in a container
    (``emas["slow"] = ema``, ``update = ema.update``), it is updated under that name; bound to
    ``self`` in a class whose base comes from elsewhere, the base's methods may update it."""
    bound = model.roles.full_names.get(name, set()) | {name}
    own = set(_UPDATES) | {"update"}
    defs = {n.name.value: n for n in walk(model.module, into_functions=True) if isinstance(n, cst.ClassDef)}
    classes = set(defs)
    created = {id(c) for c in model.roles.constructed.get(name, [])}
    own_class = defs.get(last_part(constructor))
    if own_class is not None:  # the file's own EMA class: whichever of its methods is called may be the update
        called = model.index.methods_called.get(name, set()) | {"forward", "__call__"}
        if any(isinstance(n, cst.FunctionDef) and n.name.value in called and _mutates(n) for n in walk(own_class, into_functions=True)):
            return True
    for node in walk(model.module, into_functions=True):
        if isinstance(node, cst.Call) and last_part(constructor) == "LitEma" and dotted(node.func) in bound:
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in ("append", "extend", "insert", "add") \
                and any((dotted(v) or "") in bound for a in node.args for v in _elements(a.value)):
            return True  # `model_emas.append((model_ema, decay))`: updated as the container's item
        if isinstance(node, cst.Assign) and not any(last_part(dotted(t.target) or "") == name for t in node.targets):
            for value in _elements(node.value):
                held = dotted(value) or ""
                if held in bound or held.rpartition(".")[0] in bound and (
                        held.rpartition(".")[2] in own or held.rpartition(".")[2].startswith("update")):
                    return True  # another name for the EMA or its update method, or a container holding it
        if isinstance(node, cst.ClassDef) and any(b.startswith("self.") for b in bound) and any(
                id(n) in created for n in walk(node, into_functions=True)) and (any(
                last_part(dotted(base.value) or "") not in _PLAIN_BASES | classes for base in node.bases)
                or _hands_self_out(node)):
            return True
    return False


_READS_SELF = {"super", "isinstance", "getattr", "hasattr", "setattr", "type", "id", "print", "str", "repr",
               "__setattr__", "__delattr__", "__getattribute__"}  # `object.__setattr__(self, name, value)`


def _hands_self_out(cls: cst.ClassDef) -> bool:
    """A method passes ``self`` to other code (``hook.after_iter(self)``): that code may update the EMA it holds."""
    return any(isinstance(n, cst.Call) and last_part(func_name(n) or "") not in _READS_SELF
               and any(isinstance(a.value, cst.Name) and a.value.value == "self" for a in n.args)
               for n in walk(cls, into_functions=True))


def _mutates(function: cst.FunctionDef) -> bool:
    """The function changes tensors in place (``p.mul_(d).add_(q)``, ``torch._foreach_lerp_``,
    ``load_state_dict``): an update of the weights it reads."""
    for n in walk(function, into_functions=True):
        if isinstance(n, cst.Call):
            func = n.func
            called = func.attr.value if isinstance(func, cst.Attribute) else last_part(func_name(n) or "")
            if called == "load_state_dict" or called.startswith("_foreach_") or \
                    called.endswith("_") and not called.startswith("_") and called[:-1].isidentifier():
                return True
    return False


def _loaded_into_another(model: FileModel, name: str) -> bool:
    """``name`` is a stand-in whose weights another EMA of the file takes over
    (``ema_unet.load_state_dict(load_model.state_dict())``, the diffusers scripts' resume path that
    builds an ``EMAModel`` from the checkpoint only to load the real EMA from it): that other EMA is
    the one the loop averages into, and the finding, if any, is its own."""
    emas = {n for n, calls in model.roles.constructed.items()
            if any(role_of_constructor(func_name(c) or "") is Role.EMA for c in calls)} - {name}
    for call in model.index.calls:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict" and call.args):
            continue
        if last_part(dotted(func.value) or "") not in emas:
            continue
        state = call.args[0].value
        if isinstance(state, cst.Call) and isinstance(state.func, cst.Attribute) \
                and state.func.attr.value == "state_dict" and last_part(dotted(state.func.value) or "") == name:
            return True
    return False


# Keras-style callbacks an EMA helper updates itself in (`on_batch_end`, `on_train_batch_end`, `on_step_end`)
_CALLBACK = Pattern(r"^on_\w*(?:batch|step)_end$")


def _kept_in_a_function_that_trains_nothing(model: FileModel, ema: cst.Call, name: str) -> bool:
    """The EMA is a local of a function of the file that runs no training loop and neither returns it
    nor stores it (a DDP smoke test that builds one to check its broadcast): no loop is meant to update it."""
    function = _holding(model, ema)
    if function is None or _trains(model, function):
        return False
    for node in walk(function):
        if type(node) is cst.Assign and node.value is ema and any(type(t.target) is not cst.Name for t in node.targets):
            return False  # `self.ema = EMA(model)`: kept for the object's other methods
        if type(node) is cst.Return and node.value is not None and name in names_in(node.value):
            return False
        if type(node) is cst.Assign and any(type(t.target) is not cst.Name for t in node.targets) \
                and name in names_in(node.value):
            return False  # `self.ema = ema`, `state["ema"] = ema`
    return True


def _outside_training(model: FileModel, ema: cst.Call) -> bool:
    """The EMA is built in a function of the file that runs no training loop (a checkpoint loader's
    ``tmp_ema = ExponentialMovingAverage(...)``, filled by ``load_state_dict`` and copied into the
    model for inference): not the EMA a loop must update."""
    function = _holding(model, ema)
    return function is not None and not _trains(model, function)


def _holding(model: FileModel, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The function of the file whose body holds ``node``."""
    return next((f for fns in model.index.functions.values() for f in fns if any(n is node for n in walk(f))), None)


def _trains(model: FileModel, function: cst.FunctionDef) -> bool:
    return any(t.loop.function is function for t in model.training_loops)


def _of_an_untrained_model(model: FileModel, ema: cst.Call) -> bool:
    """The model the EMA is built around is one the file trains nothing of (``EMA(diff, ...)`` where
    the only optimizers are a linear probe's over its classifiers)."""
    wrapped = dotted(ema.args[0].value) if ema.args and not ema.args[0].keyword else None
    trained = trained_modules(model)
    return wrapped is not None and bool(trained) and module_name(wrapped) not in trained


def _elements(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The value itself, or what a list, tuple, set or dict literal holds."""
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        return [e.value for e in value.elements]
    if isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    return [value]


def _copies_the_weights(call: cst.Call) -> bool:
    """A decay of 0 (``EMA(0)``, ``decay=0``): each update copies the weights, so the object is a
    store for them (a backup while averaged weights are evaluated), not an average."""
    first = call.args[0] if call.args else None
    decay = keyword(call, "decay") or keyword(call, "beta")
    if decay is None and first is not None and first.keyword is None:
        decay = first.value  # only a literal can settle it: a model or parameters come first elsewhere
    return decay is not None and is_zero(decay)


def _given_weights(call: cst.Call) -> bool:
    """Something that may be the model or its parameters is handed to the constructor. Built from
    nothing but literals (``EMA()``, ``EMA(0.99)``, ``EMA(beta=0.9)``), the object averages values it is
    fed later (a metric smoother called as ``losses = averager(losses)``), not a model's weights."""
    return any(not isinstance(a.value, (cst.Integer, cst.Float, cst.SimpleString, cst.Name, cst.UnaryOperation))
               or isinstance(a.value, cst.Name) and a.value.value not in ("True", "False", "None")
               for a in call.args)


class EmaNeverUpdated(Rule):
    code = "LC402"
    message = "an EMA model is created but never updated"

    VALID = [
        """
ema = ModelEmaV2(model, decay=0.9998)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    ema.update(model)
""",
        """
swa_model = AveragedModel(model)
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer, swa_model)
""",
    ]
    INVALID = [
        """
def evaluate(net, loader):
    with torch.no_grad():
        return sum(criterion(net(x), y).item() for x, y in loader)

ema = ModelEmaV3(model, decay=0.999)  # LC402
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    print(evaluate(ema, val_loader))
""",
        """
ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))  # LC402
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
torch.save(ema_model.state_dict(), "ema.pt")
""",
        """
class Trainer:
    def __init__(self, model, cfg):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        if getattr(cfg.ema, "enabled", False):
            self.ema = ExponentialMovingAverage(model, decay=cfg.ema.decay)  # LC402
        else:
            self.ema = None

    def train_one_epoch(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            criterion(self.model(x), y).backward()
            self.optimizer.step()

    def save(self, path):
        if self.ema:
            self.ema.apply_shadow()
            torch.save(self.model.state_dict(), path)
            self.ema.restore()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if not model.training_loops:
            return
        updated = {last_part(e.receiver) for e in model.events(Kind.EMA_UPDATE) if e.receiver}
        for name, calls in model.roles.constructed.items():
            # the constructor first: the checks below walk every call of the file, for each name
            ema = next((c for c in calls if role_of_constructor(func_name(c) or "") is Role.EMA), None)
            if ema is None or _copies_the_weights(ema) or not _given_weights(ema):
                continue
            methods = model.index.methods_called.get(name, set())
            if name in updated or methods & _UPDATES or any(m.startswith("update") for m in methods):
                continue
            if any(_CALLBACK.search(m) for m in methods):
                continue  # `ema.on_batch_end(model)`: a callback-style EMA that updates itself every N batches
            if _kept_in_a_function_that_trains_nothing(model, ema, name):
                continue  # a test of the EMA's own machinery (a broadcast, a checkpoint round trip)
            if any("hook" in m for m in methods):
                continue  # `ema.add_to_optimizer_post_step_hook(optimizer)`: the optimizer's step updates it
            if name in model.index.passed and not _only_read_by_helpers(model, name):
                continue  # handed to code that may update it
            if _updated_elsewhere(model, name, func_name(ema) or ""):
                continue
            if _loaded_into_another(model, name):
                continue  # a checkpoint's EMA read into the real one (`ema.load_state_dict(tmp.state_dict())`)
            if "load_state_dict" in methods and (_of_an_untrained_model(model, ema) or _outside_training(model, ema)):
                continue  # a trained EMA restored to be read (a linear probe's features, an inference load)
            yield Violation(ema, ema, f"`{name}` is created but never updated: it keeps the initial "
                                      "weights, and evaluating or saving it ships an untrained model")
        if "deepcopy(" in model.source and has_copied_ema_text(model.source):
            yield from _unchanged_copies(model)


def _unchanged_copies(model: FileModel) -> Iterator[Violation]:
    """A hand-rolled EMA, ``self.ema = copy.deepcopy(self.net)`` of the trained model, that no code
    of the file changes in place (``loopcheck.model.weight_copies``): at the update that rebinds a
    name instead, where there is one, else at the copy."""
    from loopcheck.model.memory import module_name, trained_modules

    trained = trained_modules(model)
    if not any(module_name(copied_module(c) or "") in trained for c in copies_by_index(model)):
        return  # no copy of a module the file trains: the module is not walked
    for name, call, rebinding in copied_emas(model):
        copied = copied_module(call) or ""
        if module_name(copied) not in trained:
            continue  # a copy of something the file does not train
        if name.startswith("self.") and _reached_from_outside(model, call):
            continue
        if rebinding is not None:
            bound = dotted(rebinding.targets[0].target)
            yield Violation(rebinding, rebinding,
                            f"this update of `{name}` rebinds `{bound}` to the averaged value and leaves the tensor "
                            f"it named as it was; nothing else changes the copy, so `{name}` keeps the weights "
                            f"`copy.deepcopy({copied})` gave it, and evaluating or saving it ships them: change it "
                            f"in place (`{bound}.mul_(d).add_(..., alpha=1 - d)` or `{bound}.copy_(...)`)")
            continue
        yield Violation(call, call, f"`{name}` is a copy of `{copied}` that no code of the file changes in place: "
                                    "it keeps the weights it was copied with, and evaluating or saving it ships "
                                    "them (an EMA update changes its tensors in place, `e.mul_(d).add_(p, alpha=1 - d)`)")


def _reached_from_outside(model: FileModel, call: cst.Call) -> bool:
    """The class that binds ``self.ema`` has a base from elsewhere, or hands ``self`` to other code:
    either may change the copy through the object."""
    classes = [n for n in walk(model.module, into_functions=True) if isinstance(n, cst.ClassDef)]
    names = {c.name.value for c in classes}
    owner = next((c for c in reversed(classes) if any(n is call for n in walk(c, into_functions=True))), None)
    if owner is None:
        return True
    return _hands_self_out(owner) or any(last_part(dotted(b.value) or "") not in _PLAIN_BASES | names
                                         for b in owner.bases)
