"""Backward passes and gradient resets.

``torch.autograd.backward`` (which ``Tensor.backward`` calls) is wrapped to read the loss's
``grad_fn`` on the host before backward runs. Per-parameter post-accumulate-grad hooks say
which optimizers a backward reached and whether a parameter's gradient was reset since the
previous backward of the same window: a different tensor (``set_to_none``) or a version jump
after a ``zero_grad`` call. Hooks run on autograd's threads, so they only set flags; callsites
are taken on the main thread."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .callsite import user_site
from .loss_scale import SCALER_MARK, inspect_loss
from .patching import replace_attr
from .state import BackwardInfo, OptimizerRecord

if TYPE_CHECKING:
    from .session import Session

HOOKED_PER_GROUP = 2  # first and last parameter of each group
# the loss of every backward is read during the first windows, then in one window of 8
FULL_INSPECTION_WINDOWS = 64
INSPECT_EVERY = 8


class ParamState:
    """What the last backward left in one parameter's ``.grad``."""

    __slots__ = ("grad_ref", "version", "window", "zero_calls", "rebase")

    def __init__(self) -> None:
        self.grad_ref: weakref.ref[Any] | None = None
        self.version = -1
        self.window = -1
        self.zero_calls = -1
        self.rebase = -1


class GradTracker:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.current: BackwardInfo | None = None
        self.seq = 0
        self.zero_calls = 0  # optimizer/module zero_grad calls so far
        self.rebase = 0  # bumped by clip/unscale_, which change gradients in place

    # -- installation ------------------------------------------------------------------
    def install(self) -> None:
        import torch

        replace_attr(self.session.stack, torch.autograd, "backward", self._wrap_backward)

    def watch_params(self, record: OptimizerRecord, params: list[Any]) -> None:
        """Map every trainable parameter to its optimizer (clipping looks it up) but hook only
        a few, spread over the group: any of them sees a backward reach the optimizer, and a
        zero_grad resets them all. Hooks cost a Python call per parameter per backward."""
        fresh = [p for p in params if getattr(p, "requires_grad", False)
                 and id(p) not in self.session.param_owner]
        for param in fresh:
            self.session.param_owner[id(param)] = record
        record.params += len(fresh)
        count = len(fresh)
        picks = sorted({0, count - 1}) if count > HOOKED_PER_GROUP else range(count)
        for index in picks:
            record.handles.append(fresh[index].register_post_accumulate_grad_hook(
                self._make_hook(record, ParamState())))

    # -- backward ---------------------------------------------------------------------
    def _wrap_backward(self, original: Any) -> Any:
        guard, session = self.session.guard, self.session

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if self.current is not None:  # reentrant (checkpointing) or a nested backward
                return original(tensors, *args, **kwargs)
            info = guard.call("backward tracking", self._before, tensors, args, kwargs)
            try:
                return original(tensors, *args, **kwargs)
            finally:
                self.current = None
                if info is not None:
                    guard.call("backward tracking", session.after_backward, info)

        return backward

    def _before(self, tensors: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> BackwardInfo:
        session = self.session
        loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
        retain = kwargs.get("retain_graph")
        if retain is None and len(args) >= 2:
            retain = args[1]
        self.seq += 1
        info = BackwardInfo(self.seq, user_site(), retain_graph=bool(retain),
                            epoch=session.data.current, in_step=session.steps_running > 0)
        node = getattr(loss, "grad_fn", None)
        windows = session.windows_closed
        if node is not None and (windows < FULL_INSPECTION_WINDOWS or windows % INSPECT_EVERY == 0):
            scaler = node.metadata.get(SCALER_MARK) if node.metadata else None
            if scaler is not None:
                info.scaled = True
                node = node.next_functions[0][0]
            info.scale = inspect_loss(node)
        session.before_backward(info, loss)
        self.current = info
        return info

    def _unwrapped_backward(self) -> BackwardInfo:
        """A backward that bypassed the wrapper (``from torch.autograd import backward``
        before the session started): still count it, ending it with autograd's callback."""
        import torch

        self.seq += 1
        info = BackwardInfo(self.seq, None, epoch=self.session.data.current)
        self.current = info

        def finished() -> None:
            self.current = None

        torch.autograd.Variable._execution_engine.queue_callback(finished)
        return info

    # -- per-parameter hook -----------------------------------------------------------
    def _make_hook(self, record: OptimizerRecord, state: ParamState) -> Any:
        guard = self.session.guard

        def hook(param: Any) -> None:
            if "gradient tracking" in guard.disabled:
                return
            try:
                self._on_accumulated(param, record, state)
            except Exception as exc:  # noqa: BLE001 - never break the user's backward
                guard.fail("gradient tracking", exc)

        return hook

    def _on_accumulated(self, param: Any, record: OptimizerRecord, state: ParamState) -> None:
        info = self.current or self._unwrapped_backward()
        window = record.window
        if record.last_bw is not info:
            record.last_bw = info
            self.session.on_backward_reached(record, info)
        grad = param.grad
        if grad is None:
            return
        version = grad._version
        if state.window == window.number and version == state.version + 1 and state.grad_ref() is grad:
            state.version = version  # the common case: accumulation into the same buffer
            state.zero_calls = self.zero_calls
            return
        if state.window >= 0 and not info.in_step:
            same = state.grad_ref is not None and state.grad_ref() is grad
            pure_add = version == state.version + 1
            zeroed = self.zero_calls != state.zero_calls
            reset = not same or (not pure_add and zeroed)
            if state.window == window.number:
                if reset:
                    self.session.on_reset(record, window)
            elif state.window == window.number - 1 and len(window.entries) == 1:
                unchanged = pure_add or (self.rebase != state.rebase and not zeroed)
                if same and unchanged:
                    window.carried = True
        if state.grad_ref is None or state.grad_ref() is not grad:
            state.grad_ref = weakref.ref(grad)
        state.version = version
        state.window = window.number
        state.zero_calls = self.zero_calls
        state.rebase = self.rebase
