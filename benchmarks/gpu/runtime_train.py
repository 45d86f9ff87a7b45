"""The training script of the user-view overhead benchmark (``benchmarks/gpu/runtime.sh``).

Run as ``python runtime_train.py --workload launch|gpu`` (plain), under ``loopcheck run``, or
with ``--watch`` (the timed loop inside ``loopcheck.runtime.watch()``). After ``--warmup``
optimizer steps it times ``--steps`` steps in steady state (one device synchronisation before
and after the timed region, none inside) and prints one JSON line: ``{"ms_per_step": ...,
"host_ms_per_step": ...}``, the second being the main thread's CPU time per step: the host work
that loopcheck adds shows there without the run-to-run noise of the wall clock.

Workloads (accumulation 4, float16 autocast + GradScaler, unscale_ + clip, LR scheduler):
  launch  a small MLP (8 layers, width 512, micro-batch 64): the step is bound by kernel
          launches and host work (several ms on an H100/H200, the GPU mostly idle).
  gpu     a wider MLP (6 layers, width 8192, micro-batch 2048): bound by the GPU's math.
On a machine without CUDA both run on the CPU (for trying the script, not for the numbers)."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

WORKLOADS = {"launch": (8, 512, 64), "gpu": (6, 8192, 2048)}  # layers, width, micro-batch
ACCUM = 4


def make_step(workload: str, device: str, total_steps: int) -> Callable[[], None]:
    """One optimizer step of ``workload`` on ``device`` (its model, optimizer, scaler and a OneCycleLR
    schedule over ``total_steps`` built here, before any loopcheck session)."""
    layers, width, batch = WORKLOADS[workload]
    torch.manual_seed(0)
    blocks = [m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())]
    model = nn.Sequential(*blocks, nn.Linear(width, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device == "cuda")
    scaler = torch.amp.GradScaler(device)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=total_steps + 1)
    data = [(torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(ACCUM)]
    dtype = torch.float16 if device == "cuda" else torch.bfloat16

    def step() -> None:
        for x, y in data:
            with torch.autocast(device, dtype=dtype):
                loss = nn.functional.cross_entropy(model(x), y) / ACCUM
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="launch")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--watch", action="store_true", help="time the loop inside loopcheck.runtime.watch()")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = make_step(args.workload, device, args.warmup + args.steps)

    context: contextlib.AbstractContextManager = contextlib.nullcontext()
    if args.watch:
        from loopcheck.runtime import watch

        context = watch(summary=False)
    with context:
        for _ in range(args.warmup):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        start, host_start = time.perf_counter(), time.thread_time()
        for _ in range(args.steps):
            step()
        host = time.thread_time() - host_start  # before the final wait, which spins on the CPU
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    print(json.dumps({"ms_per_step": 1000 * elapsed / args.steps, "host_ms_per_step": 1000 * host / args.steps,
                      "workload": args.workload,
                      "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
