"""Cheap cross-rank consistency: every K optimizer steps each rank keeps a few elements of the
gradients and parameters of its DDP model(s); the merge compares them across ranks and reports
the first sampled step where they differ.

Off the hot path and free of host-device synchronisation: at a sampled step the elements are
gathered into one small tensor on the device and copied into pinned host memory with
``non_blocking=True`` after which a CUDA event is recorded; the host reads the values only once
``event.query()`` says the copy is done (a later step, or the end of the run). Nothing is
exchanged during training: each rank's samples travel in its part of the report."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..hooks.distributed import DdpState
    from ..session import Session

ELEMENTS = 4  # per sampled tensor: the first elements of the first and last parameter
MAX_SAMPLES = 2048
TOLERANCE = 1e-6  # relative; all-reduced gradients are normally bit-identical across ranks


class ConsistencySampler:
    def __init__(self, session: Session, every: int) -> None:
        self.session = session
        self.every = every
        self.samples: list[tuple[int, list[float]]] = []
        self.pending: list[tuple[int, Any, Any]] = []  # (step, host tensor, event or None)

    def on_step(self, index: int, states: list[DdpState]) -> None:
        if self.pending:
            self._resolve(block=False)
        if self.every <= 0 or index % self.every or len(self.samples) + len(self.pending) >= MAX_SAMPLES:
            return
        tensors = []
        for state in states:
            module = state.module()
            if module is None:
                continue
            params = [p for p in module.parameters() if p.requires_grad and p.grad is not None]
            for param in {id(p): p for p in params[:1] + params[-1:]}.values():
                tensors += [param.grad, param]
        if tensors:
            self.session.guard.call("consistency check", self._sample, index, tensors)

    def _sample(self, index: int, tensors: list[Any]) -> None:
        torch = self.session.torch
        with torch.no_grad():
            values = torch.cat([t.detach().reshape(-1)[:ELEMENTS].float() for t in tensors])
            if values.device.type == "cuda":
                host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
                host.copy_(values, non_blocking=True)
                event = torch.cuda.Event()
                # on the tensors' device: a rank may train on cuda:1 while cuda:0 stays current
                event.record(torch.cuda.current_stream(values.device))
                self.pending.append((index, host, event))
            else:
                self.pending.append((index, values.clone() if values.device.type == "cpu"
                                     else values.to("cpu"), None))

    def _resolve(self, block: bool) -> None:
        still = []
        for index, host, event in self.pending:
            if event is not None and not event.query():
                if not block:
                    still.append((index, host, event))
                    continue
                event.synchronize()
            self.samples.append((index, host.tolist()))
        self.pending = still

    def finish(self) -> None:
        """End of the run: wait for the copies still in flight."""
        self.session.guard.call("consistency check", self._resolve, True)

    def as_json(self) -> dict[str, Any]:
        return {"every": self.every, "elements": ELEMENTS,
                "samples": [{"step": step, "values": values} for step, values in sorted(self.samples)]}


def _same(a: list[float], b: list[float]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if math.isnan(x) and math.isnan(y):
            continue
        if not abs(x - y) <= TOLERANCE * max(abs(x), abs(y)):
            return False
    return True


def compare(parts: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Compare the samples of each rank (``{rank: consistency section}``) at the steps all ranks
    sampled. ``diverged_at_step``: the first such step where a rank differs from the lowest
    rank; ``last_agreeing_step``: the sampled step before it where all agreed."""
    by_rank = {rank: {s["step"]: s["values"] for s in section.get("samples", [])}
               for rank, section in parts.items()}
    result: dict[str, Any] = {"every": next((s.get("every") for s in parts.values()), None),
                              "compared_steps": 0, "diverged_at_step": None,
                              "last_agreeing_step": None, "diverged_ranks": []}
    if len(by_rank) < 2:
        return result
    steps = sorted(set.intersection(*(set(samples) for samples in by_rank.values())))
    base_rank = min(by_rank)
    for step in steps:
        result["compared_steps"] += 1
        reference = by_rank[base_rank][step]
        differ = [rank for rank, samples in sorted(by_rank.items())
                  if rank != base_rank and not _same(reference, samples[step])]
        if differ:
            result["diverged_at_step"], result["diverged_ranks"] = step, differ
            break
        result["last_agreeing_step"] = step
    return result
