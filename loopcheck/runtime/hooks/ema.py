"""EMA / weight averaging has no hooks: ``AveragedModel.update_parameters`` and the update
methods of timm, ema_pytorch and torch_ema are wrapped (the third-party ones as soon as their
module is imported: ``imports``), and EMA objects are remembered from their constructor."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session

# (module, class, update method); third-party ones when the user's code imports them
EMA_CLASSES = (
    ("torch.optim.swa_utils", "AveragedModel", "update_parameters"),
    ("timm.utils.model_ema", "ModelEmaV2", "update"),
    ("timm.utils.model_ema", "ModelEmaV3", "update"),
    ("ema_pytorch", "EMA", "update"),
    ("torch_ema", "ExponentialMovingAverage", "update"),
)


@dataclass
class EmaRecord:
    kind: str
    site: Site | None
    created_at_step: int
    updates: int = 0
    since_step: int = 0


class EmaHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.records: weakref.WeakKeyDictionary[Any, EmaRecord] = weakref.WeakKeyDictionary()
        self.all: list[EmaRecord] = []
        self.wrapped: set[type] = set()
        self.total = 0  # updates of every EMA

    def install(self) -> None:
        """Wrap each EMA class when its module is imported (now, if it already is): EMAs are
        usually built before the first step, and their first updates count too."""
        for module_name, class_name, method in EMA_CLASSES:
            self.session.imports.on_import(
                module_name, lambda module, c=class_name, m=method: self._wrap_class(module, c, m))

    def _wrap_class(self, module: Any, class_name: str, method: str) -> None:
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type) or cls in self.wrapped:
            return
        self.wrapped.add(cls)
        replace_attr(self.session.stack, cls, "__init__", self._wrap_init)
        replace_attr(self.session.stack, cls, method, self._wrap_update)

    def _wrap_init(self, original: Any) -> Any:
        guard = self.session.guard

        def __init__(ema: Any, *args: Any, **kwargs: Any) -> None:
            original(ema, *args, **kwargs)
            guard.call("EMA tracking", self._created, ema)

        return __init__

    def _created(self, ema: Any) -> None:
        if ema not in self.records:
            record = EmaRecord(type(ema).__name__, user_site(), self.session.step_index())
            self.records[ema] = record
            self.all.append(record)

    def _wrap_update(self, original: Any) -> Any:
        guard = self.session.guard

        def update(ema: Any, *args: Any, **kwargs: Any) -> Any:
            guard.call("EMA tracking", self._updated, ema)
            return original(ema, *args, **kwargs)

        return update

    def _updated(self, ema: Any) -> None:
        self._created(ema)
        record = self.records[ema]
        record.updates += 1
        self.total += 1
        record.since_step += 1
        if record.since_step == 2 and self.session.records:
            self.session.report("LC401", f"the {record.kind} update runs more than once per "
                                "optimizer step (on every micro-batch?): update it once, after "
                                "the step", user_site())

    def on_step(self) -> None:
        for record in self.all:
            record.since_step = 0
