"""LC501, LC502 and LC503 from what the DDP/DataParallel wrappers saw (``distributed``).

A DDP *micro-batch* is one backward pass of a graph built by the wrapper's forward; whether it
all-reduced is the wrapper's ``require_backward_grad_sync`` at forward time (``no_sync()``
sets it to False for the duration of the ``with`` block; DDP reads it in its forward). Per
optimizer window of N micro-batches, the intended pattern is N-1 unsynced and the last synced:

* LC501: 2 or more micro-batches of a window synced: each extra one is a redundant all-reduce
  of every gradient bucket (the gradients stay correct, only communication is wasted);
* LC502: the window's last micro-batch did not sync (its gradients stay local: ranks step with
  different gradients and drift apart), or ``no_sync()`` was entered only around the backward
  of a micro-batch whose forward ran with sync on (DDP ignores it: the all-reduce happens).
* LC503 (end of run): BatchNorm layers (not SyncBatchNorm) under DDP over 2+ ranks, or under
  DataParallel over 2+ GPUs, whose usual per-GPU batch is below ``BATCHNORM_MIN_BATCH``."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..hooks.distributed import DdpState
    from ..session import Session

# Below 16 samples per GPU the batch statistics get noisy enough to cost accuracy: BatchNorm's
# ImageNet error rises from 23.6% at 32 per GPU to 24.1% at 16, 26.3% at 8 and 34.7% at 2
# (Wu & He, "Group Normalization", ECCV 2018, Figure 1). SyncBatchNorm computes the
# statistics over all ranks' micro-batches instead.
BATCHNORM_MIN_BATCH = 16
MIB = 1 << 20


def _size(nbytes: int) -> str:
    return f"{nbytes / MIB:.1f} MiB" if nbytes >= MIB / 10 else f"{nbytes} bytes"


def close_window(session: Session, state: DdpState, index: int) -> None:
    window, state.window = state.window, []
    if not window:
        return
    state.windows += 1
    state.micro_batches += len(window)
    synced = [forward for forward, _, _ in window].count(True)
    state.synced += synced
    backward_only = [site for forward, backward, site in window if forward and not backward]
    if backward_only:
        state.backward_only_no_sync += len(backward_only)
        session.report("LC502", "no_sync() (or require_backward_grad_sync = False) covers only the "
                       "backward pass: DDP decides at forward time, so this micro-batch was "
                       "all-reduced anyway; run its forward inside the no_sync() block too",
                       backward_only[0], index)
    last_forward, _, last_site = window[-1]
    if not last_forward:
        state.unsynced_last += 1
        session.report("LC502", f"the last micro-batch before the optimizer step ran its forward "
                       f"with gradient sync off (no_sync() / require_backward_grad_sync = False; "
                       f"{synced} of {len(window)} micro-batches synced): its gradients were never "
                       "all-reduced, so the ranks step with different gradients and drift apart; "
                       "sync the last micro-batch of every window", last_site, index)
    if synced >= 2:
        redundant = synced - 1
        state.redundant_allreduces += redundant
        if not backward_only:  # LC502 already explains these all-reduces
            first_site = next(site for forward, _, site in window if forward)
            session.report("LC501", f"{synced} of the {len(window)} micro-batches of an optimizer "
                           f"step all-reduce their gradients: {redundant} redundant all-reduce"
                           f"{'s' if redundant > 1 else ''} of {_size(state.grad_bytes)} each "
                           f"({_size(redundant * state.grad_bytes)} per step); run all but the "
                           "last micro-batch under model.no_sync()", first_site, index)


def batchnorm(session: Session, state: DdpState, world_size: int) -> None:
    replicas = world_size if state.kind != "DataParallel" else state.devices
    if not state.batchnorms or replicas < 2 or not state.batch_sizes:
        return
    batch = state.per_device(state.batch_sizes.most_common(1)[0][0])
    if batch is None or batch >= BATCHNORM_MIN_BATCH:
        return
    layers = f"{state.batchnorms} BatchNorm layer{'s' if state.batchnorms > 1 else ''}"
    verb = "normalises" if state.batchnorms == 1 else "normalise"
    session.report("LC503", f"{layers} inside this {state.kind} model {verb} over a per-GPU "
                   f"batch of {batch} (below {BATCHNORM_MIN_BATCH}; {replicas} replicas): noisy "
                   "statistics; convert them with torch.nn.SyncBatchNorm.convert_sync_batchnorm"
                   "(model) before wrapping", state.site, 0)
