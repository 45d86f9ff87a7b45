"""Overhead of loopcheck's runtime checker under DDP, and proof that it adds no host-device
synchronisation there. Launch with torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node=2 benchmarks/runtime_overhead_ddp.py \
        [--workloads gpt2,mlp] [--blocks 6] [--steps 10] [--out benchmarks/results/runtime-ddp-NAME]

The workloads of ``runtime_overhead.py`` wrapped in DistributedDataParallel (NCCL), with
correct accumulation: the first 3 of 4 micro-batches under ``no_sync()``. Blocks with and
without ``watch()`` are interleaved as in ``runtime_overhead.py`` (the cross-rank consistency
sample is taken every ``--consistency-every`` steps, default 16, so it is part of the cost);
every step ends with a device synchronisation and a barrier-free timing on each rank; rank 0
reports the median over both ranks' steps.

``--sync-check``: first runs the mlp loop under ``torch.cuda.set_sync_debug_mode("warn")``,
without and with ``watch()`` (consistency sampled on every step), and counts the
synchronisation warnings of each: loopcheck must add none."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_overhead import GPT

from loopcheck.runtime import watch

ACCUM = 4


def make_workload(name: str, device: torch.device):
    if name == "gpt2":
        model = DDP(GPT().to(device), device_ids=[device.index])
        batches = [(torch.randint(0, 50304, (4, 1024), device=device),) * 2 for _ in range(ACCUM)]

        def loss_fn(x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            return nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    else:
        layers: list[nn.Module] = []
        for _ in range(8):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        model = DDP(nn.Sequential(*layers, nn.Linear(512, 10)).to(device), device_ids=[device.index])
        batches = [(torch.randn(64, 512, device=device), torch.randint(0, 10, (64,), device=device))
                   for _ in range(ACCUM)]

        def loss_fn(x, y):
            return nn.functional.cross_entropy(model(x), y)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    def step() -> None:
        for i, (x, y) in enumerate(batches):
            with contextlib.nullcontext() if i == ACCUM - 1 else model.no_sync():
                (loss_fn(x, y) / ACCUM).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def _without_distributed_hooks() -> contextlib.AbstractContextManager:
    """For attribution: loopcheck with its distributed part (issue 6) switched off."""
    from loopcheck.runtime import distributed

    stack = contextlib.ExitStack()
    for name, replacement in (("install", lambda self: None), ("before_backward", lambda self, info: None),
                              ("on_window_closed", lambda self, record: None)):
        stack.callback(setattr, distributed.DistributedHooks, name, getattr(distributed.DistributedHooks, name))
        setattr(distributed.DistributedHooks, name, replacement)
    return stack


def run_block(step, warmup: int, steps: int, checked: bool | str) -> list[float]:
    times = []
    hooks_off = _without_distributed_hooks() if checked == "loopcheck-nodist" else contextlib.nullcontext()
    hooks_off.__enter__()
    context = watch(summary=False) if checked else None
    if context is not None:
        context.__enter__()
    try:
        for i in range(warmup + steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            torch.cuda.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - start)
    finally:
        if context is not None:
            context.__exit__(None, None, None)
            assert context.findings == [], context.findings  # the loop is correct
        hooks_off.__exit__(None, None, None)
    return times


def sync_check(device: torch.device) -> dict:
    os.environ["LOOPCHECK_CONSISTENCY_EVERY"] = "1"  # exercise the sampler on every step
    step = make_workload("mlp", device)
    run_block(step, 3, 0, False)
    counts = {}
    for variant in ("plain", "loopcheck", "plain-again"):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_block(step, 0, 6, variant == "loopcheck")  # syncs in the harness: counted alike
        torch.cuda.set_sync_debug_mode(0)
        counts[variant] = sum("synchroniz" in str(w.message) for w in caught)
    os.environ.pop("LOOPCHECK_CONSISTENCY_EVERY")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="gpt2,mlp")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--sync-check", action="store_true")
    parser.add_argument("--attribute", action="store_true",
                        help="add a third variant: loopcheck without its distributed hooks")
    parser.add_argument("--out")
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    result: dict = {"meta": {"torch": torch.__version__, "python": platform.python_version(),
                             "device": torch.cuda.get_device_name(device), "world_size": world,
                             "backend": "nccl", "command": "torchrun --standalone --nproc_per_node="
                             f"{world} " + " ".join(sys.argv)}, "results": []}
    if args.sync_check:
        result["sync_check"] = sync_check(device)
        if rank == 0:
            print(json.dumps({"sync_check_warnings": result["sync_check"]}), flush=True)
    for name in args.workloads.split(","):
        step = make_workload(name, device)
        run_block(step, 3, 0, False)
        blocks, steps = (args.blocks * 2, max(args.steps // 2, 1)) if name == "gpt2" else (args.blocks, args.steps * 5)
        variants = ["plain", "loopcheck"] + (["loopcheck-nodist"] if args.attribute else [])
        times: dict[str, list[float]] = {v: [] for v in variants}
        for b in range(blocks):
            for variant in (variants if b % 2 == 0 else variants[::-1]):
                times[variant] += run_block(step, args.warmup, steps, variant != "plain" and variant)
        gathered: list = [None] * world
        dist.all_gather_object(gathered, times)
        if rank == 0:
            plain = [t for g in gathered for t in g["plain"]]
            checked = [t for g in gathered for t in g["loopcheck"]]
            row = {"workload": name, "steps_per_variant_per_rank": len(times["plain"]),
                   "median_step_ms_plain": round(statistics.median(plain) * 1e3, 4),
                   "median_step_ms_loopcheck": round(statistics.median(checked) * 1e3, 4),
                   "mean_step_ms_plain": round(statistics.fmean(plain) * 1e3, 4),
                   "mean_step_ms_loopcheck": round(statistics.fmean(checked) * 1e3, 4)}
            row["overhead_percent"] = round((row["median_step_ms_loopcheck"] / row["median_step_ms_plain"] - 1) * 100, 2)
            if args.attribute:
                nodist = [t for g in gathered for t in g["loopcheck-nodist"]]
                row["median_step_ms_loopcheck_nodist"] = round(statistics.median(nodist) * 1e3, 4)
            result["results"].append(row)
            print(json.dumps(row), flush=True)
        del step
        torch.cuda.empty_cache()
    if rank == 0 and args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
