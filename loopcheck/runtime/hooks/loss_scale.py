"""What the loss passed to ``backward`` was divided or multiplied by, read from its
``grad_fn`` chain on the host before backward frees the saved tensors (no device sync:
a Python-number divisor is saved as a CPU scalar; a device-tensor divisor is not read)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCALER_MARK = "loopcheck.scaled_by"  # key in grad_fn.metadata set by GradScaler.scale's wrapper
_MAX_NODES = 24  # grad_fn nodes read per loss (a few terms of a sum, each a few factors deep)
_MEAN, _SUM = 1, 2  # torch's Reduction enum as saved on loss nodes


@dataclass(frozen=True)
class LossScale:
    factor: float  # product of the constant factors applied on top of the reduced loss
    normalised: bool  # divided by a data-dependent count or a sum-reduced loss: not LC102's business
    mean_reduced: bool  # the reduced loss below the factors is a per-batch mean
    summed: bool = False  # normalised because it is sum-reduced (not divided by a count)

    @property
    def known(self) -> bool:
        return self.mean_reduced and not self.normalised


def _scalar(saved: Any) -> float | None:
    """A host-side constant as a float; None for device tensors (reading them would sync) and
    for tensors that are themselves part of the graph (a product of two losses)."""
    if isinstance(saved, (int, float)):
        return float(saved)
    if saved.is_cpu and saved.dim() == 0 and not saved.requires_grad:  # a Python number
        return saved.item()
    return None


def inspect_loss(node: Any) -> LossScale | None:
    """``node`` is the loss's grad_fn, with any GradScaler multiplication already peeled off."""
    return _inspect(node, [_MAX_NODES])


def _inspect(node: Any, budget: list[int]) -> LossScale | None:
    factor = 1.0
    while node is not None and budget[0] > 0:
        budget[0] -= 1
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
        if kind.startswith(("AddBackward", "SubBackward")):
            terms = _sum_of(node, budget)
            return None if terms is None else LossScale(factor * terms.factor, terms.normalised,
                                                        terms.mean_reduced)
        reduction = getattr(node, "_saved_reduction", None)
        if kind.startswith("Sum") or reduction == _SUM:
            return LossScale(factor, True, False, summed=True)
        return LossScale(factor, False, kind.startswith("Mean") or reduction == _MEAN)
    return None


def _sum_of(node: Any, budget: list[int]) -> LossScale | None:
    """A sum of losses (``ce + aux``, ``loss1 + loss2``): its scale is that of its largest
    mean-reduced term, the main loss (``ce / N + 0.01 * aux / N`` is divided by N). A term
    divided by a count on the device may be normalised over the window: then nothing is
    concluded. Sum-reduced terms (a weighted ``.sum()`` regulariser) do not decide."""
    terms = [_inspect(next_node, budget) for next_node, _ in node.next_functions if next_node is not None]
    if any(term is None for term in terms):
        return None
    if any(term.normalised and not term.summed for term in terms if term is not None):
        return LossScale(1.0, True, False)
    means = [term.factor for term in terms if term is not None and term.mean_reduced]
    if not means:
        return LossScale(1.0, True, False)
    return LossScale(max(means, key=abs), False, True)
