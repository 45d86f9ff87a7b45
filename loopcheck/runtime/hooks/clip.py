"""Gradient clipping: ``clip_grad_norm_``/``clip_grad_value_`` are module functions without
hooks, so they are wrapped where users reach them (``torch.nn.utils`` and its ``clip_grad``
module). A generator of parameters is turned into a list once, so the wrapper can look at it
and the real function still gets every parameter."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..callsite import user_site
from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session

_FUNCTIONS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


class ClipHooks:
    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        import torch.nn.utils
        import torch.nn.utils.clip_grad

        for module in (torch.nn.utils, torch.nn.utils.clip_grad):
            for name in _FUNCTIONS:
                if name in vars(module):
                    replace_attr(self.session.stack, module, name, self._wrap)

    def _wrap(self, original: Any) -> Any:
        guard, torch = self.session.guard, self.session.torch

        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(parameters, torch.Tensor):
                parameters = list(parameters)
            guard.call("clip tracking", self._on_clip, parameters)
            return original(parameters, *args, **kwargs)

        return clip

    def _on_clip(self, parameters: Any) -> None:
        session = self.session
        session.clip_calls += 1
        session.tracker.rebase += 1
        params = [parameters] if isinstance(parameters, session.torch.Tensor) else parameters
        record = next((session.param_owner[id(p)] for p in params if id(p) in session.param_owner), None)
        if record is None:
            return
        site = user_site()
        window = record.window
        if window.entries or window.in_step_backwards:
            window.clip_site = site
        elif record.steps and record.history and record.history[-1].size and not window.zero_grad_calls:
            session.report("LC107", "gradients are clipped after optimizer.step(): the step "
                           "already used them unclipped; clip right before the step", site)
        else:  # a backward that follows makes this clip pointless: said when it comes
            window.clip_before_backward = site
        optimizer = record.ref()
        if optimizer is None or not window.scaled:
            return
        for scaler in session.scalers.enabled_scalers():
            if session.scalers.stage(scaler, optimizer) is session.scalers.OptState.READY:
                session.report("LC201", "gradients are clipped while still multiplied by the "
                               "GradScaler scale: call scaler.unscale_(optimizer) before "
                               "clipping", site)
                return
