"""GradScaler: ``scale``/``unscale_``/``step``/``update`` compared with the scaler's own
per-optimizer stage (READY / UNSCALED / STEPPED), a host-side dict: no device sync.

A step GradScaler skips (inf/NaN) never reaches the optimizer's post-hook for ordinary
optimizers; fused ones always run and skip inside the kernel, so for them the ``found_inf``
flags are read when they are on the CPU (on a GPU reading them would sync: not done)."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..callsite import user_site
from ..patching import replace_attr
from .loss_scale import SCALER_MARK

if TYPE_CHECKING:
    from ..session import Session


class ScalerHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.scalers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.calls = {"scale": 0, "unscale_": 0, "step": 0, "update": 0}

    def install(self) -> None:
        from torch.amp import grad_scaler

        self.OptState = grad_scaler.OptState
        stack, cls = self.session.stack, grad_scaler.GradScaler
        replace_attr(stack, cls, "scale", self._wrap("scale", self._on_scale, after=True))
        replace_attr(stack, cls, "unscale_", self._wrap("unscale_", self._on_unscale))
        replace_attr(stack, cls, "update", self._wrap("update", self._on_update))
        replace_attr(stack, cls, "step", self._wrap_step)

    def stage(self, scaler: Any, optimizer: Any) -> Any:
        states = getattr(scaler, "_per_optimizer_states", None)  # absent while disabled
        state = states.get(id(optimizer)) if states is not None else None  # .get: a defaultdict
        return state["stage"] if state else self.OptState.READY

    def enabled_scalers(self) -> list[Any]:
        return [s for s in self.scalers if getattr(s, "_enabled", False)]

    def _wrap(self, name: str, check: Any, after: bool = False) -> Any:
        guard = self.session.guard

        def make(original: Any) -> Any:
            def method(scaler: Any, *args: Any, **kwargs: Any) -> Any:
                if not after:
                    guard.call("GradScaler tracking", check, scaler, *args)
                result = original(scaler, *args, **kwargs)
                if after:
                    guard.call("GradScaler tracking", check, scaler, result)
                return result

            return method

        return make

    def _on_scale(self, scaler: Any, outputs: Any) -> None:
        self.calls["scale"] += 1
        self.scalers.add(scaler)
        node = getattr(outputs, "grad_fn", None)
        if scaler._enabled and node is not None:
            node.metadata[SCALER_MARK] = True

    def _on_unscale(self, scaler: Any, optimizer: Any) -> None:
        self.calls["unscale_"] += 1
        self.scalers.add(scaler)
        self.session.tracker.rebase += 1
        if scaler._enabled and self.stage(scaler, optimizer) is self.OptState.UNSCALED:
            self.session.report("LC204", "scaler.unscale_() is called again before "
                                "scaler.update(): unscale once per optimizer step, in the step "
                                "branch (torch raises a RuntimeError here)", user_site())

    def _on_update(self, scaler: Any, *args: Any) -> None:
        self.calls["update"] += 1
        if not scaler._enabled:  # a disabled scaler has no per-optimizer states at all
            return
        states = scaler._per_optimizer_states
        if not any(s["stage"] is not self.OptState.READY for s in states.values()):
            self.session.report("LC202", "scaler.update() runs without a scaler.step() since the "
                                "last update (update on every micro-batch?): update once, right "
                                "after scaler.step()", user_site())

    def _wrap_step(self, original: Any) -> Any:
        guard = self.session.guard

        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            record = guard.call("GradScaler tracking", self._before_step, scaler, optimizer)
            try:
                return original(scaler, optimizer, *args, **kwargs)
            finally:
                if record is not None:
                    record.scaler_stepping = False
                    guard.call("GradScaler tracking", self._after_step, scaler, optimizer, record)

        return step

    def _before_step(self, scaler: Any, optimizer: Any) -> Any:
        self.calls["step"] += 1
        self.scalers.add(scaler)
        if not scaler._enabled:
            return None
        if self.stage(scaler, optimizer) is self.OptState.STEPPED:
            self.session.report("LC202", "scaler.step() is called again without scaler.update() "
                                "in between (a path skips update): torch raises a RuntimeError",
                                user_site())
        record = self.session.record_for(optimizer)
        record.step_site = user_site()  # a skipped step never reaches the optimizer's pre-hook
        record.scaler_stepping = True
        record.post_hook_fired = False
        self.session.tracker.rebase += 1
        return record

    def _after_step(self, scaler: Any, optimizer: Any, record: Any) -> None:
        if self.stage(scaler, optimizer) is not self.OptState.STEPPED:
            return  # the step raised before it ran
        if not record.post_hook_fired:
            self.session.close_window(record, skipped=True)
        elif record.fused:
            self.session.close_window(record, skipped=self._fused_skipped(scaler, optimizer))

    def _fused_skipped(self, scaler: Any, optimizer: Any) -> bool:
        flags = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"].values()
        if all(flag.device.type == "cpu" for flag in flags):
            return any(float(flag) > 0 for flag in flags)
        return False  # on the device: unknown without a sync, counted as a step
