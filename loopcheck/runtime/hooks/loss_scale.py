"""What the loss passed to ``backward`` was divided or multiplied by, read from its
``grad_fn`` chain on the host before backward frees the saved tensors (no device sync:
a Python-number divisor is saved as a CPU scalar; a device-tensor divisor is not read)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCALER_MARK = "loopcheck.scaled_by"  # key in grad_fn.metadata set by GradScaler.scale's wrapper
_MAX_SCALING_NODES = 4
_MEAN, _SUM = 1, 2  # torch's Reduction enum as saved on loss nodes


@dataclass(frozen=True)
class LossScale:
    factor: float  # product of the constant factors applied on top of the reduced loss
    normalised: bool  # divided by a data-dependent count or a sum-reduced loss: not LC102's business
    mean_reduced: bool  # the reduced loss below the factors is a per-batch mean

    @property
    def known(self) -> bool:
        return self.mean_reduced and not self.normalised


def _scalar(saved: Any) -> float | None:
    """A host-side scalar as a float; None for device tensors (reading them would sync)."""
    if isinstance(saved, (int, float)):
        return float(saved)
    if saved.is_cpu and saved.dim() == 0:  # a Python number is saved as a 0-dim CPU tensor
        return saved.item()
    return None


def inspect_loss(node: Any) -> LossScale | None:
    """``node`` is the loss's grad_fn, with any GradScaler multiplication already peeled off."""
    factor = 1.0
    for _ in range(_MAX_SCALING_NODES):
        if node is None:
            return None
        kind = type(node).__name__
        if kind.startswith(("DivBackward", "MulBackward")):
            saved = getattr(node, "_saved_other", None)
            if saved is None:
                return None
            value = _scalar(saved)
            if value is None:
                return LossScale(factor, True, False)  # divided by a count on the device
            if value == 0:
                return None
            factor = factor / value if kind.startswith("Div") else factor * value
            node = node.next_functions[0][0]
            continue
        reduction = getattr(node, "_saved_reduction", None)
        if kind.startswith("Sum") or reduction == _SUM:
            return LossScale(factor, True, False)
        return LossScale(factor, False, kind.startswith("Mean") or reduction == _MEAN)
    return None
