"""Backward passes and gradient resets, observed on the main thread around each backward.

``torch.autograd.backward`` (which ``Tensor.backward`` calls) is wrapped. Before the backward
runs, the loss's ``grad_fn`` is read on the host (see ``loss_scale``). A few *probe*
parameters per optimizer group (its first and last) are compared before and after: a
gradient that changed during the backward means the backward reached that optimizer; a
gradient that changed between two backward passes of one window means it was reset (another
tensor or ``None`` after ``set_to_none``, or a new ``_version`` after a ``zero_grad`` call;
clipping and ``unscale_`` change versions too and are told apart by their own wrappers).

Per-parameter post-accumulate-grad hooks would see the same, but on a GPU they run on
autograd's device thread and each one hands the GIL over: measured on an H200 with torch 2.11,
two hooked parameters cost about 150 us per backward, the probes a few microseconds.

FSDP2 gradients are DTensors: accumulation moves only the local shard's ``_version``, an in-place
``zero_grad`` only the DTensor's, so their version is the sum of both."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..callsite import user_site
from ..checks import at_backward
from ..patching import replace_attr
from ..state import BackwardInfo, OptimizerRecord
from .loss_scale import SCALER_MARK, inspect_loss

if TYPE_CHECKING:
    from ..session import Session

# the loss of every backward is read during the first windows (LC102 needs a few regular
# windows, not every one), then in one window of 8
FULL_INSPECTION_WINDOWS = 16
INSPECT_EVERY = 8


_Tensor: Any = None  # torch.Tensor, set when the tracker is installed (torch is imported lazily)


def grad_version(grad: Any) -> int:
    """``grad._version``; plus its local tensor's for a wrapper subclass (DTensor)."""
    if type(grad) is _Tensor:
        return grad._version
    local = getattr(grad, "_local_tensor", None)
    return grad._version + (local._version if local is not None else 0)


class Probe:
    """One watched parameter and what the last backward that reached it left in ``.grad``."""

    __slots__ = ("param", "grad_ref", "version", "window", "zero_calls", "rebase",
                 "start_grad", "start_version")

    def __init__(self, param: Any) -> None:
        self.param = weakref.ref(param)
        self.grad_ref: weakref.ref[Any] | None = None
        self.version = -1
        self.window = -1  # window number of the record when last reached
        self.zero_calls = -1
        self.rebase = -1
        self.start_grad: Any = None
        self.start_version = -1


class GradTracker:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.current: BackwardInfo | None = None
        self.seq = 0
        self.zero_calls = 0  # optimizer/module zero_grad calls so far
        self.rebase = 0  # bumped by clip/unscale_, which change gradients in place
        self.scales_seen = 0

    def install(self) -> None:
        import torch

        global _Tensor
        _Tensor = torch.Tensor
        replace_attr(self.session.stack, torch.autograd, "backward", self._wrap_backward)

    def watch_params(self, record: OptimizerRecord, params: list[Any]) -> None:
        """Map every trainable parameter to its optimizer (clipping looks it up) and probe the
        first and last of the group: a backward that reaches the optimizer reaches one of them
        in practice, and a zero_grad resets them all."""
        fresh = [p for p in params if getattr(p, "requires_grad", False)
                 and id(p) not in self.session.param_owner]
        for param in fresh:
            self.session.param_owner[id(param)] = record
        record.params += len(fresh)
        if fresh:
            record.probes.extend(Probe(p) for p in {id(p): p for p in (fresh[0], fresh[-1])}.values())

    # -- backward ---------------------------------------------------------------------
    def _wrap_backward(self, original: Any) -> Any:
        guard = self.session.guard

        part, disabled = "backward tracking", guard.disabled

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if self.current is not None or part in disabled:  # reentrant (checkpointing), nested
                return original(tensors, *args, **kwargs)
            try:  # the guard, inlined: this runs on every backward
                info = self._before(tensors, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - switched off, training goes on
                guard.fail(part, exc)
                info = None
            try:
                return original(tensors, *args, **kwargs)
            finally:
                self.current = None
                if info is not None and part not in disabled:
                    try:
                        self._after(info)
                    except Exception as exc:  # noqa: BLE001
                        guard.fail(part, exc)

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
        scales = session.scalers.enabled_scales
        if scales != self.scales_seen:  # GradScaler.scale ran since the last backward
            self.scales_seen = scales
            info.scaled = True
        node = getattr(loss, "grad_fn", None)
        windows = session.windows_closed
        if node is not None and (windows < FULL_INSPECTION_WINDOWS or windows % INSPECT_EVERY == 0):
            if info.scaled and node.metadata.get(SCALER_MARK):
                node = node.next_functions[0][0]  # the multiplication by the scale
            info.scale = inspect_loss(node)
        at_backward.run(session, info, loss)
        if session.dist.ddp:
            session.guard.call("DDP tracking", session.dist.before_backward, info)  # sync flags
        for record in session.records:
            self._look_before(record)
        self.current = info
        return info

    def _look_before(self, record: OptimizerRecord) -> None:
        """Was a gradient reset since the previous backward that reached this optimizer, or
        is one still holding what came before the last step?"""
        number = record.window.number
        record.pending_reset = record.pending_carry = record.pending_added = False
        for probe in record.probes:
            param = probe.param()
            grad = param.grad if param is not None else None
            # grad._version for a plain tensor; grad_version() for DTensor (inlined: per backward)
            version = -1 if grad is None else grad._version if type(grad) is _Tensor else grad_version(grad)
            probe.start_grad, probe.start_version = grad, version
            if probe.window < number - 1 or probe.grad_ref is None:
                continue
            same = grad is not None and probe.grad_ref() is grad
            zeroed = self.zero_calls != probe.zero_calls
            untouched = version == probe.version
            if probe.window == number:
                if not same or (not untouched and zeroed):
                    record.pending_reset = True
                elif not zeroed:
                    record.pending_added = True  # adds to what the previous backward left
            elif same and (untouched or (self.rebase != probe.rebase and not zeroed)):
                record.pending_carry = True

    def _after(self, info: BackwardInfo) -> None:
        session = self.session
        for record in session.records:
            reached = False
            for probe in record.probes:
                param = probe.param()
                grad = param.grad if param is not None else None
                start_grad, probe.start_grad = probe.start_grad, None  # hold no gradient in between
                if grad is None:
                    continue
                version = grad._version if type(grad) is _Tensor else grad_version(grad)
                if grad is start_grad and version == probe.start_version:
                    continue
                reached = True
                if probe.grad_ref is None or probe.grad_ref() is not grad:
                    probe.grad_ref = weakref.ref(grad)
                probe.version = version
                probe.window = record.window.number
                probe.zero_calls = self.zero_calls
                probe.rebase = self.rebase
            if reached:
                session.on_backward_reached(record, info)
