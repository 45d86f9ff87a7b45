"""What Lightning Fabric does with the file's objects (read from Fabric's own source):

- ``fabric.setup(model, optimizer)`` / ``fabric.setup_module(model)`` wrap the module in
  ``DistributedDataParallel`` when Fabric runs on several devices with its default strategy ("auto")
  or a DDP one; FSDP, DeepSpeed and XLA strategies decide the gradient sync themselves, and on one
  device (``Fabric(devices=1)``) nothing is wrapped.
- ``fabric.backward(loss)`` is ``loss.backward()`` plus the precision plugin's loss scaling: it
  neither steps nor divides by an accumulation count, so a Fabric loop accumulates by its own code.
- ``with fabric.no_backward_sync(model, enabled=is_accumulating):`` skips the all-reduce of the
  backward passes it encloses (the other micro-batches of a window).
- Under ``Fabric(precision="16-mixed")`` (lightning 2.x; its aliases ``"16"`` and ``16`` too, which
  lightning_fabric 1.9 and lightning_lite 1.8 spelled it) the precision plugin is ``MixedPrecision``
  with a ``GradScaler``: ``fabric.backward(loss)`` back-propagates ``scaler.scale(loss)``, and the
  gradients stay scaled until the wrapped optimizer's ``step()`` (``scaler.step`` unscales, then
  ``scaler.update``). ``fabric.clip_gradients(model, optimizer, ...)`` (2.0 on) unscales before it
  clips. ``"bf16-mixed"`` has no scaler; on ``accelerator="cpu"`` "16-mixed" becomes "bf16-mixed";
  DeepSpeed, FSDP and XLA strategies bring precision plugins of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.amp import import_aliases, qualified
from loopcheck.model.syntax import dotted, func_name, int_value, keyword, last_part, method, positional, source, walk
from loopcheck.model.values import option_defaults

if TYPE_CHECKING:
    from loopcheck.model import FileModel

# strategies whose engines, not DDP, reduce the gradients
_NOT_DDP = ("fsdp", "deepspeed", "xla", "megatron")


def ddp_setups(model: FileModel) -> list[cst.Call]:
    """``fabric.setup(model, ...)`` / ``fabric.setup_module(model)`` calls of the file, where no
    ``Fabric(...)`` of the file picks an engine of its own (``strategy="fsdp"``, ``DeepSpeedStrategy``)
    or runs on one device (``devices=1``, also through a name the file sets to 1 only)."""
    if "fabric" not in model.source.lower():
        return []
    setups = []
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] not in ("setup", "setup_module") or not positional(call):
            continue
        if "fabric" in last_part(dotted(called[0]) or "").lower():
            setups.append(call)
    if setups and any(_engine_strategy(c) or _one_device(c, model)
                      for c in model.index.calls if last_part(func_name(c) or "") == "Fabric"):
        return []
    return setups


def _one_device(call: cst.Call, model: FileModel) -> bool:
    devices = keyword(call, "devices")
    if devices is None:
        return False
    values = model.index.values.get(last_part(dotted(devices) or ""), []) if int_value(devices) is None else [devices]
    return bool(values) and all(int_value(v) == 1 for v in values)


def _engine_strategy(call: cst.Call) -> bool:
    strategy = keyword(call, "strategy")
    return strategy is not None and any(
        isinstance(n, (cst.SimpleString, cst.Name, cst.Attribute)) and any(
            s in (n.value if isinstance(n, cst.SimpleString) else dotted(n) or "").lower() for s in _NOT_DDP)
        for n in walk(strategy))


# What Lightning Fabric is imported as (lightning 2.x, lightning_fabric 1.9 and later)
_FABRIC_CLASSES = ("lightning.Fabric", "lightning.fabric.Fabric", "lightning.fabric.fabric.Fabric",
                   "lightning_fabric.Fabric", "lightning_fabric.fabric.Fabric")
# precision settings whose plugin scales the loss with a GradScaler
_SCALED = frozenset({"16-mixed", "16"})


def loss_scaling(model: FileModel, fabric: str | None) -> str | None:
    """When the Fabric the file builds as ``fabric`` (its last part) scales the loss:
    ``""`` always (``precision="16-mixed"`` written out, or every value the file gives the name
    passed), the condition (``"`args.precision` is "16-mixed", its default"``) where an option of the
    file may choose it (its default or one of its ``choices``), None where no Fabric of the file of
    that name does (or the file does not say)."""
    if not fabric or "fabric" not in model.source.lower():
        return None
    aliases = import_aliases(model.index.imports)
    conditions = []
    for call in model.roles.constructed.get(last_part(fabric), []):
        if not qualified(call.func, aliases) & set(_FABRIC_CLASSES) or _engine_strategy(call) \
                or keyword(call, "plugins") is not None or _on_cpu(call):
            continue
        precision = keyword(call, "precision")
        if precision is None:
            continue
        chosen = _chosen(precision, model)
        if chosen is not None:
            conditions.append(chosen)
    if not conditions:
        return None
    return "" if "" in conditions else conditions[0]


def _on_cpu(call: cst.Call) -> bool:
    """``Fabric(accelerator="cpu", ...)``: "16-mixed" falls back to "bf16-mixed" there, with no scaler."""
    accelerator = keyword(call, "accelerator")
    return isinstance(accelerator, cst.SimpleString) and accelerator.evaluated_value == "cpu"


def _scaled(value: cst.BaseExpression) -> bool | None:
    """Whether a literal precision scales the loss (None: not a literal)."""
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        return value.evaluated_value in _SCALED
    number = int_value(value)
    return None if number is None else number == 16


def _chosen(precision: cst.BaseExpression, model: FileModel) -> str | None:
    """``""`` where ``precision`` is a scaling literal (or a name the file sets to such literals
    only), the option condition where an ``add_argument`` option of the file may choose one (its
    default or one of its ``choices``), None otherwise."""
    literal = _scaled(precision)
    if literal is not None:
        return "" if literal else None
    name = dotted(precision)
    if name is None:
        return None
    short = last_part(name)
    values = model.index.values.get(short, [])
    if values:
        found = [_scaled(v) for v in values]
        return "" if all(found) else None
    for option, default in option_defaults(model.index):
        if option != short:
            continue
        if default is not None and _scaled(default):
            return f'`{source(precision)}` is "16-mixed", its default'
        if any(_scaled(c) for c in _choices(model, option)):
            return f'`{source(precision)}` is "16-mixed", one of its choices'
    return None


def _choices(model: FileModel, option: str) -> list[cst.BaseExpression]:
    """The literal ``choices=[...]`` of the ``add_argument`` call of ``option``."""
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] != "add_argument":
            continue
        flags = [a.evaluated_value for a in positional(call) if isinstance(a, cst.SimpleString)]
        if not any(isinstance(f, str) and f.lstrip("-").replace("-", "_") == option for f in flags):
            continue
        choices = keyword(call, "choices")
        if isinstance(choices, (cst.List, cst.Tuple, cst.Set)):
            return [e.value for e in choices.elements]
    return []
