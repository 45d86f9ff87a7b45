"""Checks that run on the main thread right before a backward pass."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session
    from ..state import BackwardInfo


def run(session: Session, info: BackwardInfo, loss: Any) -> None:
    if info.scaled:
        if session.scalers.unscales_since_update:  # a stage may be UNSCALED
            _unscaled_window(session, info)
    elif session.autocast.fp16_since_last_backward():
        session.report("LC205", "backward on a loss computed under float16 autocast without a "
                       "GradScaler: small gradients underflow to zero (use "
                       "torch.amp.GradScaler, or bfloat16)", info.site)
    if session.modes.in_eval:  # a module in eval mode: rare, checked in modes
        session.modes.check_backward()
    if session.retained.window != session.windows_closed:  # one loss per window is watched
        session.retained.watch(loss, info.site, info.scaled)
    elif info.in_step:  # and a few of the closure's later evaluations
        session.retained.watch_evaluation(loss, info.site)


def _unscaled_window(session: Session, info: BackwardInfo) -> None:
    """A backward after ``unscale_`` and before the step mixes unscaled and scaled gradients."""
    scalers = session.scalers
    for scaler in scalers.enabled_scalers():
        for record in session.records:
            optimizer = record.ref()
            if optimizer is not None and scalers.stage(scaler, optimizer) is scalers.OptState.UNSCALED:
                session.report("LC204", "a backward pass runs after scaler.unscale_() and before "
                               "the step: unscaled and scaled gradients are summed; unscale "
                               "only on the window's last micro-batch", info.site)
                return
