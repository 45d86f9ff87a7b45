"""GradScaler: ``scale``/``unscale_``/``step``/``update`` compared with the scaler's own
per-optimizer stage (READY / UNSCALED / STEPPED), a host-side dict: no device sync.

A step GradScaler skips (inf/NaN) never reaches the optimizer's post-hook for ordinary
optimizers; fused ones always run and skip inside the kernel, so for them the ``found_inf``
flags are read when they are on the CPU (on a GPU reading them would sync: not done).

The scale itself is read directly from a CPU scaler; on a GPU it is followed on the host
(``ScaleMirror``): it starts at ``init_scale`` and ``update`` multiplies it by the backoff
factor after a skipped step and by the growth factor after ``growth_interval`` steps that ran,
exactly as ``torch._amp_update_scale_`` does, as long as every skip is known (not for fused
optimizers on a GPU, whose skips would need a sync to read)."""
from __future__ import annotations

import struct
import weakref
from typing import TYPE_CHECKING, Any

from ..callsite import user_site
from ..patching import replace_attr
from .loss_scale import SCALER_MARK

if TYPE_CHECKING:
    from ..session import Session


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _dead() -> None:
    """A weak reference to nothing."""
    return None


class ScaleMirror:
    """The scale of one GradScaler as known on the host; ``value`` is None when unknown."""

    __slots__ = ("scaler", "value", "tracker", "found_inf", "exact")

    def __init__(self, scaler: Any) -> None:
        self.scaler = weakref.ref(scaler)
        self.found_inf = False  # a step since the last update was skipped
        self.exact = scaler._scale is None  # seen before its first scale(): followed from the start
        self.value: float | None = float(scaler._init_scale) if self.exact else None
        self.tracker = int(getattr(scaler, "_init_growth_tracker", 0))

    def current(self) -> float | None:
        scaler = self.scaler()
        scale = getattr(scaler, "_scale", None)
        if scale is not None and scale.is_cpu:
            return float(scale)  # a CPU tensor: no sync
        return self.value

    def step_done(self, skipped: bool | None) -> None:
        if skipped is None:  # unknown (a fused optimizer on a device)
            self.value = None
            self.exact = False
        elif skipped:
            self.found_inf = True

    def updated(self, scaler: Any, new_scale: Any) -> None:
        found_inf, self.found_inf = self.found_inf, False
        if new_scale is not None:
            if isinstance(new_scale, float):
                self.value = _float32(new_scale)
            elif getattr(new_scale, "is_cpu", False):
                self.value = _float32(float(new_scale))
            else:
                self.value, self.exact = None, False
            return
        if self.value is None:
            return
        if found_inf:
            self.value = _float32(self.value * scaler._backoff_factor)
            self.tracker = 0
        else:
            self.tracker += 1
            if self.tracker == scaler._growth_interval:
                self.value = _float32(self.value * scaler._growth_factor)
                self.tracker = 0

    def loaded(self, state: dict[str, Any]) -> None:
        self.value = _float32(float(state["scale"]))
        self.tracker = int(state["_growth_tracker"])
        self.found_inf = False


class ScalerHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.scalers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.calls = {"scale": 0, "unscale_": 0, "step": 0, "update": 0}
        self.mirrors: weakref.WeakKeyDictionary[Any, ScaleMirror] = weakref.WeakKeyDictionary()
        self.disabled_seen = False  # a GradScaler(enabled=False) was used
        self.enabled_seen = False
        self.enabled_scales = 0  # scale() calls of enabled scalers
        self.unscales_since_update = 0  # an optimizer's stage may be UNSCALED while > 0
        self._scaled_last: Any = _dead  # weakref to the scaler of the latest scale() call
        self._mirror_last: ScaleMirror | None = None  # mirror()'s latest answer

    def install(self) -> None:
        from torch.amp import grad_scaler

        self.OptState = grad_scaler.OptState
        stack, cls = self.session.stack, grad_scaler.GradScaler
        replace_attr(stack, cls, "scale", self._wrap_scale)
        replace_attr(stack, cls, "load_state_dict", self._wrap("load_state_dict", self._on_load, after=True))
        replace_attr(stack, cls, "unscale_", self._wrap("unscale_", self._on_unscale))
        replace_attr(stack, cls, "update", self._wrap("update", self._on_update))
        replace_attr(stack, cls, "step", self._wrap_step)

    def stage(self, scaler: Any, optimizer: Any) -> Any:
        states = getattr(scaler, "_per_optimizer_states", None)  # absent while disabled
        state = states.get(id(optimizer)) if states is not None else None  # .get: a defaultdict
        return state["stage"] if state else self.OptState.READY

    def enabled_scalers(self) -> list[Any]:
        return [s for s in self.scalers if getattr(s, "_enabled", False)]

    def mirror(self, scaler: Any) -> ScaleMirror:
        last = self._mirror_last
        if last is not None and last.scaler() is scaler:  # called a few times per step
            return last
        mirror = self.mirrors.get(scaler)
        if mirror is None:
            mirror = self.mirrors[scaler] = ScaleMirror(scaler)
        self._mirror_last = mirror
        return mirror

    def _wrap(self, name: str, check: Any, after: bool = False) -> Any:
        guard = self.session.guard

        def make(original: Any) -> Any:
            def method(scaler: Any, *args: Any, **kwargs: Any) -> Any:
                if not after:
                    guard.call("GradScaler tracking", check, scaler, *args, *kwargs.values())
                result = original(scaler, *args, **kwargs)
                if after:
                    guard.call("GradScaler tracking", check, scaler, *args)
                return result

            return method

        return make

    def _wrap_scale(self, original: Any) -> Any:
        guard = self.session.guard
        part, disabled, calls = "GradScaler tracking", guard.disabled, self.calls

        def scale(scaler: Any, outputs: Any) -> Any:
            # runs on every micro-batch: the guard is inlined, and a scaler seen at the
            # previous call needs no lookup in the weak containers (Python code)
            new = self._scaled_last() is not scaler
            if new and part not in disabled:
                guard.call(part, self._first_scale, scaler)
            result = original(scaler, outputs)
            if part not in disabled:
                try:
                    calls["scale"] += 1
                    if not scaler._enabled:
                        self.disabled_seen = True
                    else:
                        self.enabled_seen = True
                        self.enabled_scales += 1  # the next backward is of a scaled loss
                        node = getattr(result, "grad_fn", None)
                        if node is not None:
                            node.metadata[SCALER_MARK] = True
                except Exception as exc:  # noqa: BLE001 - switched off, training goes on
                    guard.fail(part, exc)
            return result

        return scale

    def _first_scale(self, scaler: Any) -> None:
        """A scaler not seen at the previous ``scale()`` (usually: the first call)."""
        self.scalers.add(scaler)
        if scaler._enabled and scaler not in self.mirrors:  # before its scale tensor exists
            self.mirror(scaler)
        self._scaled_last = weakref.ref(scaler)

    def _on_load(self, scaler: Any, state: Any) -> None:
        if scaler._enabled and isinstance(state, dict) and "scale" in state:
            self.mirror(scaler).loaded(state)

    def _on_unscale(self, scaler: Any, optimizer: Any) -> None:
        self.calls["unscale_"] += 1
        self.unscales_since_update += 1
        self.scalers.add(scaler)
        self.session.tracker.rebase += 1
        if scaler._enabled and self.stage(scaler, optimizer) is self.OptState.UNSCALED:
            self.session.report("LC204", "scaler.unscale_() is called again before "
                                "scaler.update(): unscale once per optimizer step, in the step "
                                "branch (torch raises a RuntimeError here)", user_site())

    def _on_update(self, scaler: Any, new_scale: Any = None) -> None:
        self.calls["update"] += 1
        self.unscales_since_update = 0
        if not scaler._enabled:  # a disabled scaler has no per-optimizer states at all
            return
        states = scaler._per_optimizer_states
        if not any(s["stage"] is not self.OptState.READY for s in states.values()):
            self.session.report("LC202", "scaler.update() runs without a scaler.step() since the "
                                "last update (update on every micro-batch?): update once, right "
                                "after scaler.step()", user_site())
            return  # torch raises: nothing was updated
        self.mirror(scaler).updated(scaler, new_scale)

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
            self.disabled_seen = True
            return None
        if self.stage(scaler, optimizer) is self.OptState.STEPPED:
            self.session.report("LC202", "scaler.step() is called again without scaler.update() "
                                "in between (a path skips update): torch raises a RuntimeError",
                                user_site())
        record = self.session.record_for(optimizer)
        record.step_site = user_site()  # a skipped step never reaches the optimizer's pre-hook
        record.scaler_stepping = True
        record.scale = self.mirror(scaler)
        record.post_hook_fired = False
        self.session.tracker.rebase += 1
        return record

    def _after_step(self, scaler: Any, optimizer: Any, record: Any) -> None:
        if self.stage(scaler, optimizer) is not self.OptState.STEPPED:
            return  # the step raised before it ran
        mirror = self.mirror(scaler)
        if not record.post_hook_fired:
            mirror.step_done(True)
            self.session.close_window(record, skipped=True)
        elif record.fused:
            skipped = self._fused_skipped(scaler, optimizer)
            mirror.step_done(skipped)
            self.session.close_window(record, skipped=bool(skipped))
        else:
            mirror.step_done(False)

    def _fused_skipped(self, scaler: Any, optimizer: Any) -> bool | None:
        flags = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"].values()
        if all(flag.device.type == "cpu" for flag in flags):
            return any(float(flag) > 0 for flag in flags)
        return None  # on the device: unknown without a sync, counted as a step
