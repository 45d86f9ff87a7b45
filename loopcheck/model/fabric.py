"""What Lightning Fabric does with the file's objects (read from Fabric's own source):

- ``fabric.setup(model, optimizer)`` / ``fabric.setup_module(model)`` wrap the module in
  ``DistributedDataParallel`` when Fabric runs on several devices with its default strategy ("auto")
  or a DDP one; FSDP, DeepSpeed and XLA strategies decide the gradient sync themselves, and on one
  device (``Fabric(devices=1)``) nothing is wrapped.
- ``fabric.backward(loss)`` is ``loss.backward()`` plus the precision plugin's loss scaling: it
  neither steps nor divides by an accumulation count, so a Fabric loop accumulates by its own code.
- ``with fabric.no_backward_sync(model, enabled=is_accumulating):`` skips the all-reduce of the
  backward passes it encloses (the other micro-batches of a window).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, int_value, keyword, last_part, method, positional, walk

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
