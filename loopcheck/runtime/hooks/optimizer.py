"""Optimizers: global step pre/post hooks (a post-hook fires only for steps that ran) plus
thin wrappers where torch has no hook: ``add_param_group`` (to hook every parameter of every
optimizer, including ones created later) and ``zero_grad`` (optimizer and module)."""
from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from ..callsite import user_site
from ..patching import replace_attr
from ..step_site import step_sites

if TYPE_CHECKING:
    from ..session import Session
    from ..state import Window


_STEP, _ZERO = "optimizer step tracking", "zero_grad tracking"  # guard parts


class OptimizerHooks:
    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        import torch
        from torch.optim import optimizer as optim_module

        session, stack = self.session, self.session.stack
        replace_attr(stack, torch.optim.Optimizer, "add_param_group", self._wrap_add_param_group)
        replace_attr(stack, torch.optim.Optimizer, "zero_grad", self._wrap_zero_grad(optimizer=True))
        replace_attr(stack, torch.nn.Module, "zero_grad", self._wrap_zero_grad(optimizer=False))
        replace_attr(stack, torch.optim.Optimizer, "load_state_dict", self._wrap_load_state_dict)
        stack.callback(optim_module.register_optimizer_step_pre_hook(self._pre_hook).remove)
        stack.callback(optim_module.register_optimizer_step_post_hook(self._post_hook).remove)
        # a notebook may have built its optimizers before the session started
        for obj in gc.get_objects():
            if issubclass(type(obj), torch.optim.Optimizer):  # type(): no lazy-module side effects
                session.guard.call("optimizer tracking", self.adopt, obj, True)

    def adopt(self, optimizer: Any, existing: bool = False) -> None:
        record = self.session.record_for(optimizer)
        record.adopted = record.adopted or existing
        for group in optimizer.param_groups:
            self.session.tracker.watch_params(record, list(group["params"]))

    def _wrap_add_param_group(self, original: Any) -> Any:
        guard = self.session.guard

        def add_param_group(optimizer: Any, param_group: Any) -> None:
            original(optimizer, param_group)
            guard.call("optimizer tracking", self.adopt, optimizer)

        return add_param_group

    def _wrap_load_state_dict(self, original: Any) -> Any:
        guard = self.session.guard

        def load_state_dict(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            guard.call("optimizer tracking", self._loaded, optimizer)
            return original(optimizer, *args, **kwargs)

        return load_state_dict

    def _loaded(self, optimizer: Any) -> None:
        """State loaded before the first step: a resumed run, whose schedule starts mid-way."""
        record = self.session.record_for(optimizer, create=False)
        if record is not None and not (record.steps or record.skipped):
            record.resumed = True

    def _wrap_zero_grad(self, optimizer: bool) -> Any:
        session, guard = self.session, self.session.guard

        def note(owner: Any) -> None:
            session.tracker.zero_calls += 1
            session.zero_grad_calls += 1
            session.last_zero_site = user_site()
            record = session.record_for(owner, create=False) if optimizer else None
            for rec in [record] if record is not None else session.records:
                window = rec.window
                window.zero_grad_calls += 1
                if window.entries:
                    window.zeroed_after_backward = session.last_zero_site
                if rec.in_step and _after_closure_backward(window):
                    window.closure_zeroed = session.last_zero_site  # LC104 unless a backward follows

        def make(original: Any) -> Any:
            def zero_grad(owner: Any, *args: Any, **kwargs: Any) -> None:
                if _ZERO not in guard.disabled:
                    try:
                        note(owner)
                    except Exception as exc:  # noqa: BLE001
                        guard.fail(_ZERO, exc)
                return original(owner, *args, **kwargs)

            return zero_grad

        return make

    # the step hooks and zero_grad run on every step: the guard is inlined
    def _pre_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        guard = self.session.guard
        if _STEP not in guard.disabled:
            try:
                self._before_step(optimizer)
            except Exception as exc:  # noqa: BLE001 - switched off, training goes on
                guard.fail(_STEP, exc)
        return None  # a 2-tuple would replace the step's arguments

    def _before_step(self, optimizer: Any) -> None:
        session = self.session
        record = session.record_for(optimizer)
        if record.params == 0:
            self.adopt(optimizer)
        if not record.in_step:
            record.in_step = True
            session.steps_running += 1
        record.post_hook_fired = False
        record.zero_calls_at_step = session.tracker.zero_calls
        record.step_site, record.step_call = step_sites(optimizer)
        window = record.window
        if window.entries and window.zeroed_after_backward is not None:
            session.report("LC104", "gradients are cleared after the backward pass and before "
                           "the step that should use them: the step sees no gradients; "
                           "zero them after the step", window.zeroed_after_backward)
        if not record.scaler_stepping and window.scaled:
            session.report("LC203", "optimizer.step() runs on gradients of a GradScaler-scaled "
                           "loss without scaler.step(): they are still multiplied by the scale "
                           "and inf/NaN steps are not skipped", record.step_site)

    def _post_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        guard = self.session.guard
        if _STEP not in guard.disabled:
            try:
                self._after_step(optimizer)
            except Exception as exc:  # noqa: BLE001
                guard.fail(_STEP, exc)

    def _after_step(self, optimizer: Any) -> None:
        record = self.session.record_for(optimizer)
        if record.in_step:
            record.in_step = False
            self.session.steps_running -= 1
        record.post_hook_fired = True
        if record.scaler_stepping and record.fused:
            return  # a fused step may have skipped inside the kernel: scaler.step decides
        self.session.close_window(record, skipped=False)


def _after_closure_backward(window: Window) -> bool:
    """A backward pass ran inside the step now running (its closure): a zero_grad of the step
    itself, with no closure evaluation before it, clears gradients it has already used."""
    return bool(window.in_step_backwards or (window.entries and window.entries[-1][0].in_step))
