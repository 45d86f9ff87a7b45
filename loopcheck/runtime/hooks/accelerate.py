"""Accelerate's gradient accumulation. ``Accelerator(gradient_accumulation_steps=N)`` divides
every loss in ``accelerator.backward`` by N, but only ``accelerator.accumulate(model)`` tells its
prepared optimizer which micro-batches must not step: a loop that never enters it steps after
every micro-batch, so the setting does nothing except shrink every update N times. The
constructor and ``accumulate`` are wrapped when ``accelerate.accelerator`` is imported; the
verdict is ``checks.finalize``'s."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session


@dataclass
class AcceleratorRecord:
    site: Site | None
    steps: int  # gradient_accumulation_steps it was built with
    accumulate_calls: int = 0


class AccelerateHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.records: weakref.WeakKeyDictionary[Any, AcceleratorRecord] = weakref.WeakKeyDictionary()
        self.all: list[AcceleratorRecord] = []

    def install(self) -> None:
        self.session.imports.on_import("accelerate.accelerator", self._wrap)

    def _wrap(self, module: Any) -> None:
        cls = getattr(module, "Accelerator", None)
        if isinstance(cls, type):
            replace_attr(self.session.stack, cls, "__init__", self._wrap_init)
            replace_attr(self.session.stack, cls, "accumulate", self._wrap_accumulate)

    def _wrap_init(self, original: Any) -> Any:
        guard = self.session.guard

        def __init__(accelerator: Any, *args: Any, **kwargs: Any) -> None:
            original(accelerator, *args, **kwargs)
            guard.call("Accelerate tracking", self._created, accelerator)

        return __init__

    def _created(self, accelerator: Any) -> None:
        steps = getattr(accelerator, "gradient_accumulation_steps", 1)
        if type(steps) is int and accelerator not in self.records:
            record = AcceleratorRecord(user_site(), steps)
            self.records[accelerator] = record
            self.all.append(record)

    def _wrap_accumulate(self, original: Any) -> Any:
        def accumulate(accelerator: Any, *args: Any, **kwargs: Any) -> Any:
            record = self.records.get(accelerator)
            if record is not None:
                record.accumulate_calls += 1
            return original(accelerator, *args, **kwargs)

        return accumulate
