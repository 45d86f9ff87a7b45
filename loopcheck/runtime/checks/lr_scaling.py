"""LC304/LC305 against the project's declared reference (``[tool.loopcheck.lr-scaling]``):
the effective batch is measured (the training loader's batch size x the regular window size x
the world size) and compared with the peak learning rate the optimizer actually used."""
from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session import Session
    from ..state import OptimizerRecord

TOLERANCE = 0.1  # as the static LC304 check


def _world_size(session: Session) -> int:
    dist = session.torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def _effective_batch(session: Session, record: OptimizerRecord) -> int | None:
    windows = [h for h in record.history if h.size and h.epochs]
    if not windows:
        return None  # no DataLoader: the micro-batch size is unknown
    window_size = Counter(h.size for h in windows).most_common(1)[0][0]
    loader = Counter(h.epochs[0][0] for h in windows).most_common(1)[0][0]
    batch = session.data.batch_sizes.get(loader)
    return batch * window_size * _world_size(session) if batch else None


def run(session: Session, record: OptimizerRecord) -> None:
    reference = session.lr_scaling
    if reference is None or record.max_lr is None or not record.steps:
        return
    lr, base = record.max_lr, reference.reference_lr
    if lr / base >= reference.warmup_threshold and record.first_lr is not None \
            and record.first_lr >= lr * (1 - TOLERANCE):
        session.report("LC305", f"the learning rate {lr:g} is {lr / base:.3g}x the reference "
                       f"{base:g} from the very first step: warm it up", record.site, 0)
    effective = _effective_batch(session, record)
    if effective is None:
        return
    expected = reference.expected_lr(effective)
    if abs(lr - expected) > TOLERANCE * expected:
        session.report("LC304", f"the peak learning rate {lr:g} does not follow the "
                       f"{reference.rule} scaling rule for the measured effective batch of "
                       f"{effective} ({base:g} at {reference.reference_batch_size}): expected "
                       f"about {expected:.3g}", record.site, 0)
