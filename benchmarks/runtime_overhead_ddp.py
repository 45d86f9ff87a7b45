"""Overhead of loopcheck's runtime checker under DDP, and proof that it adds no host-device
synchronisation there. Launch with torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node=2 benchmarks/runtime_overhead_ddp.py \
        [--workloads gpt2,gpt2-mb4,mlp:40] [--rounds 16] [--out benchmarks/results/runtime-ddp-NAME]

Workloads, wrapped in DistributedDataParallel (NCCL), each with correct accumulation (the first
3 of 4 micro-batches under ``no_sync()``), clipping, fused AdamW and an LR schedule:
  gpt2      GPU-bound: a GPT-2-small-size decoder (``runtime_overhead.GPT``), bf16 autocast,
            micro-batch 16 x 1024 tokens; the host finishes launching long before the GPU.
  gpt2-mb4  the same at micro-batch 4: on a slow host launching the kernels takes about as long
            as running them (host-bound), so every microsecond of host work shows.
  mlp       launch-bound: an 8-layer MLP (width 512, batch 64).

Method: in each round every variant runs one block (warm-up steps, then timed steps, each step
ending with a device synchronisation); the order of the variants rotates from round to round.
Per round and rank, a variant's median step time is divided by the plain block's median of
the same round; the overhead is the median of these ratios over all rounds and ranks minus 1,
with a 95% interval for that median (order statistics). Variant ``empty`` is a ``watch()``
session with nothing installed: what the block structure and noise alone give, the control.
The host time of a step is the time until ``step()`` returned, before the synchronisation:
host time close to step time means the host is the bottleneck. The main thread's CPU time per
step (``time.thread_time``, where loopcheck's hooks run) is compared the same way: the added
microseconds are loopcheck's host cost, free of GPU and scheduling noise. The cross-rank consistency sample (every 16 steps) is part of the cost. Blocks are
short sessions, so loopcheck runs in its first-steps regime throughout (every loss inspected,
DDP forward hook on): an upper bound for a long run.

``--sync-check``: first runs the mlp loop under ``torch.cuda.set_sync_debug_mode("warn")``,
without and with ``watch()`` (consistency sampled on every step), and counts the
synchronisation warnings of each: loopcheck must add none. ``--variants`` adds attribution
variants (loopcheck with parts switched off), ``--profile``/``--trace`` compare plain and
loopcheck steps under cProfile and torch.profiler."""
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
    ids = [device.index] if device.type == "cuda" else None
    if name.startswith("gpt2"):
        # on the CPU (--cpu) a small GPT of the same shape, to try the harness out
        vocab, tokens, size = (50304, 1024, {}) if device.type == "cuda" else \
            (1000, 128, {"vocab": 1000, "d": 128, "layers": 2, "heads": 4, "context": 128})
        micro = 4 if name == "gpt2-mb4" else 16
        model = DDP(GPT(**size).to(device), device_ids=ids)
        batches = [(torch.randint(0, vocab, (micro, tokens), device=device),) * 2 for _ in range(ACCUM)]

        def loss_fn(x, y):
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = model(x)
            return nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    else:
        layers: list[nn.Module] = []
        for _ in range(8):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        model = DDP(nn.Sequential(*layers, nn.Linear(512, 10)).to(device), device_ids=ids)
        batches = [(torch.randn(64, 512, device=device), torch.randint(0, 10, (64,), device=device))
                   for _ in range(ACCUM)]

        def loss_fn(x, y):
            return nn.functional.cross_entropy(model(x), y)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device.type == "cuda")
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


# Attribution variants: loopcheck with parts of it switched off (their methods made no-ops).
_PARTS_OFF = {
    "loopcheck": [],
    "nodist": [("hooks.distributed", "DistributedHooks", "install"), ("hooks.distributed", "DistributedHooks", "before_backward"),
               ("hooks.distributed", "DistributedHooks", "on_window_closed")],
    "notracker": [("hooks.backward", "GradTracker", "install")],
    "noclip": [("hooks.clip", "ClipHooks", "install")],
    "nosched": [("hooks.scheduler", "SchedulerHooks", "install")],
    "nooptim": [("hooks.optimizer", "OptimizerHooks", "install")],
    "nomemory": [("hooks.memory", "MemoryMonitor", "on_step")],
}
_PARTS_OFF["empty"] = [(m, c, "install") for m, c in (
    ("hooks.backward", "GradTracker"), ("hooks.data", "DataHooks"), ("hooks.optimizer", "OptimizerHooks"),
    ("hooks.scaler", "ScalerHooks"), ("hooks.scheduler", "SchedulerHooks"), ("hooks.clip", "ClipHooks"),
    ("hooks.ema", "EmaHooks"), ("hooks.mode", "ModeHooks"), ("hooks.autocast", "AutocastHooks"),
    ("hooks.memory", "MemoryMonitor"))] + _PARTS_OFF["nodist"]


def _parts_off(variant: str) -> contextlib.AbstractContextManager:
    """For attribution: loopcheck with some of its parts switched off."""
    import importlib

    stack = contextlib.ExitStack()
    for module_name, class_name, method in _PARTS_OFF.get(variant, []):
        cls = getattr(importlib.import_module(f"loopcheck.runtime.{module_name}"), class_name)
        stack.callback(setattr, cls, method, getattr(cls, method))
        setattr(cls, method, lambda self, *args, **kwargs: None)
    return stack


def run_block(step, warmup: int, steps: int, variant: str, host: list[float] | None = None,
              profiler=None, cpu: list[float] | None = None) -> list[float]:
    """Step times of one block; ``host`` gets the host-side time of each step (until the
    step returned, before the device synchronisation), ``cpu`` the main thread's CPU time
    per step (where loopcheck's hooks run; autograd's device threads and NCCL's are not in it)."""
    times = []
    hooks_off = _parts_off(variant)
    hooks_off.__enter__()
    context = watch(summary=False) if variant != "plain" else None
    if context is not None:
        context.__enter__()
    try:
        for i in range(warmup + steps):
            torch.cuda.synchronize()
            if profiler is not None and i == warmup:
                profiler.enable()
            start, start_cpu = time.perf_counter(), time.thread_time()
            step()
            launched, end_cpu = time.perf_counter(), time.thread_time()
            torch.cuda.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - start)
                if host is not None:
                    host.append(launched - start)
                if cpu is not None:
                    cpu.append(end_cpu - start_cpu)
        if profiler is not None:
            profiler.disable()
    finally:
        if context is not None:
            context.__exit__(None, None, None)
            # the loop is correct (variants without the backward tracking cannot tell)
            assert variant not in ("loopcheck", "nodist") or context.findings == [], context.findings
        hooks_off.__exit__(None, None, None)
    return times


def sync_check(device: torch.device) -> dict:
    os.environ["LOOPCHECK_CONSISTENCY_EVERY"] = "1"  # exercise the sampler on every step
    step = make_workload("mlp", device)
    run_block(step, 3, 0, "plain")
    counts = {}
    for variant in ("plain", "loopcheck", "plain-again"):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_block(step, 0, 6, "loopcheck" if variant == "loopcheck" else "plain")  # syncs in the harness: counted alike
        torch.cuda.set_sync_debug_mode(0)
        counts[variant] = sum("synchroniz" in str(w.message) for w in caught)
    os.environ.pop("LOOPCHECK_CONSISTENCY_EVERY")
    return counts


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1e3, 4)


def _median_interval(values: list[float]) -> tuple[float, float]:
    """95% interval of the median of ``values`` from order statistics (normal approximation)."""
    ordered, n = sorted(values), len(values)
    half = 0.98 * n ** 0.5  # 1.96 * sqrt(n) / 2
    return ordered[max(int(n / 2 - half), 0)], ordered[min(int(n / 2 + half), n - 1)]


def _pin_cores(local_rank: int, local_world: int) -> list[int]:
    """Each rank on its own share of the cores (at most 8): no migration, no sharing."""
    cores = sorted(os.sched_getaffinity(0))
    share = max(min(len(cores) // max(local_world, 1), 8), 1)
    mine = cores[local_rank * share:(local_rank + 1) * share] or cores
    os.sched_setaffinity(0, mine)
    return mine


def _profile_table(profiler, steps: int, top: int = 25) -> str:
    """loopcheck's own functions by time spent in them (tottime), per step, from cProfile."""
    import pstats

    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    ours = {k: v for k, v in stats.items() if "/loopcheck/" in k[0]}
    rows = sorted(ours.items(), key=lambda kv: -kv[1][2])[:top]
    lines = [(f"profile over {steps} steps: all Python-visible time {total / steps * 1e3:.3f} ms/step, "
             f"in loopcheck's functions {sum(v[2] for v in ours.values()) / steps * 1e6:.1f} us/step")]
    lines += [f"  {v[2] / steps * 1e6:8.1f} us/step {v[1] / steps:6.1f} calls/step  "
              f"{k[0].split('/loopcheck/')[-1]}:{k[1]} {k[2]}" for k, v in rows]
    slowest = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    lines += ["all functions by own time:"] + [
        f"  {v[2] / steps * 1e6:8.1f} us/step {v[1] / steps:6.1f} calls/step  {k[0][-60:]}:{k[1]} {k[2]}"
        for k, v in slowest]
    return "\n".join(lines)


def _trace_table(variant_events: dict[str, dict], steps: int) -> str:
    """CUDA runtime calls per step of each variant (count, host time) from torch.profiler: a call
    that only one variant makes (a synchronisation, an allocation) shows. Device time is not
    compared: NCCL kernels include the wait for the other rank."""
    variants = list(variant_events)
    names = sorted({n for events in variant_events.values() for n in events})
    lines = [f"torch.profiler over {steps} steps: per step, " + " | ".join(variants)]
    for name in names:
        counts = [variant_events[v].get(name, (0, 0)) for v in variants]
        if len({c[0] for c in counts}) > 1 or any(c[1] / steps > 200 for c in counts):
            lines.append(f"  {name}: " + " | ".join(f"{c[0] / steps:.1f} calls {c[1] / steps:.0f} us" for c in counts))
    return "\n".join(lines)


def _trace(step, warmup: int, steps: int, variant: str) -> dict:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    run_block(step, warmup, 0, variant)  # warm-up outside the trace
    with _parts_off(variant), (watch(summary=False) if variant != "plain" else contextlib.nullcontext()):
        for _ in range(warmup):
            step()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
    events: dict = {}
    for item in prof.key_averages():
        if item.key.startswith(("cuda", "nccl")) and item.key[:5] != "cudaG":  # runtime API calls
            events[item.key] = (item.count, item.cpu_time_total)
    return events


def measure(step, variants: list[str], rounds: int, warmup: int, steps: int) -> dict:
    """Per variant: block medians per round (s) of step time and main-thread CPU time, and all
    step and host times of this rank."""
    blocks: dict[str, list[float]] = {v: [] for v in variants}
    cpu_blocks: dict[str, list[float]] = {v: [] for v in variants}
    times: dict[str, list[float]] = {v: [] for v in variants}
    host: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        shift = r % len(variants)
        order = variants[shift:] + variants[:shift]
        for variant in (order if r % 2 == 0 else order[::-1]):
            cpu: list[float] = []
            block = run_block(step, warmup, steps, variant, host[variant], cpu=cpu)
            blocks[variant].append(statistics.median(block))
            cpu_blocks[variant].append(statistics.median(cpu))
            times[variant] += block
    return {"blocks": blocks, "cpu_blocks": cpu_blocks, "times": times, "host": host}


def summarise(name: str, variants: list[str], gathered: list[dict]) -> dict:
    row: dict = {"workload": name, "rounds_x_ranks": len(gathered[0]["blocks"]["plain"]) * len(gathered),
                 "steps_per_variant_per_rank": len(gathered[0]["times"]["plain"])}
    for variant in variants:
        ratios = [g["blocks"][variant][r] / g["blocks"]["plain"][r]
                  for g in gathered for r in range(len(g["blocks"]["plain"]))]
        low, high = _median_interval(ratios)
        added = [g["cpu_blocks"][variant][r] - g["cpu_blocks"]["plain"][r]
                 for g in gathered for r in range(len(g["blocks"]["plain"]))]
        added_low, added_high = _median_interval(added)
        row[variant] = {"median_step_ms": _median_ms([t for g in gathered for t in g["times"][variant]]),
                        "added_main_thread_cpu_us": round(statistics.median(added) * 1e6, 1),
                        "added_main_thread_cpu_interval_us": [round(added_low * 1e6, 1), round(added_high * 1e6, 1)],
                        "median_host_ms": _median_ms([t for g in gathered for t in g["host"][variant]]),
                        "overhead_percent": round((statistics.median(ratios) - 1) * 100, 2),
                        "overhead_interval_percent": [round((low - 1) * 100, 2), round((high - 1) * 100, 2)]}
    return row


def table(rows: list[dict], variants: list[str]) -> str:
    lines = [("| workload | variant | median step (ms) | median host time (ms) | overhead vs plain "
             "(median of paired blocks) | 95% interval | added main-thread CPU per step (us, 95% interval) |"),
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        for variant in variants:
            v = row[variant]
            lines.append(f"| {row['workload']} | {variant} | {v['median_step_ms']} | {v['median_host_ms']} | "
                         f"{v['overhead_percent']}% | {v['overhead_interval_percent'][0]}% .. "
                         f"{v['overhead_interval_percent'][1]}% | {v['added_main_thread_cpu_us']} "
                         f"({v['added_main_thread_cpu_interval_us'][0]} .. {v['added_main_thread_cpu_interval_us'][1]}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="gpt2,gpt2-mb4,mlp", help="NAME or NAME:ROUNDS, comma-separated")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=0, help="timed steps per block (default: 4 gpt2, 20 mlp)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--sync-check", action="store_true")
    parser.add_argument("--variants", default="plain,loopcheck,empty",
                        help="comma-separated, plain first: plain, loopcheck, empty, and for attribution "
                             f"loopcheck with parts switched off: {', '.join(v for v in _PARTS_OFF if v not in ('loopcheck', 'empty'))}")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="afterwards, profile STEPS steps of plain and of loopcheck with cProfile on rank 0")
    parser.add_argument("--trace", type=int, default=0, metavar="STEPS",
                        help="afterwards, trace STEPS steps of plain and of loopcheck with torch.profiler "
                             "and compare their CUDA runtime calls")
    parser.add_argument("--pin", action="store_true", help="pin each rank to its own cores (on one 2 x H200 "
                        "host this made the host side 30-60%% slower)")
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU (to try the script out)")
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    args = parser.parse_args()
    dist.init_process_group("gloo" if args.cpu else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cores = None if not args.pin else _pin_cores(local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    if args.cpu:
        device = torch.device("cpu")
        torch.cuda.synchronize = lambda *a, **k: None  # the harness's syncs are no-ops
    else:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    result: dict = {"meta": {"torch": torch.__version__, "python": platform.python_version(),
                             "device": torch.cuda.get_device_name(device) if not args.cpu else "cpu",
                             "world_size": world, "backend": dist.get_backend(), "cores_per_rank": cores and len(cores),
                             "command": f"torchrun --standalone --nproc_per_node={world} " + " ".join(sys.argv)},
                    "results": []}
    if args.sync_check:
        result["sync_check"] = sync_check(device)
        if rank == 0:
            print(json.dumps({"sync_check_warnings": result["sync_check"]}), flush=True)
    variants = args.variants.split(",")
    assert variants[0] == "plain", "--variants starts with plain"
    for item in args.workloads.split(","):
        name, _, rounds = item.partition(":")  # NAME:ROUNDS overrides --rounds
        step = make_workload(name, device)
        run_block(step, 10, 0, "plain")  # lazy init, allocator, clocks
        steps = args.steps or (4 if name.startswith("gpt2") else 20)
        mine = measure(step, variants, int(rounds or args.rounds), args.warmup, steps)
        gathered: list = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            row = summarise(name, variants, gathered)
            result["results"].append(row)
            print(json.dumps(row), flush=True)
        if args.profile:
            import cProfile

            for variant in ("plain", "loopcheck"):
                profiler = cProfile.Profile() if rank == 0 else None
                run_block(step, args.warmup, args.profile, variant, profiler=profiler)
                if rank == 0:
                    text = _profile_table(profiler, args.profile)
                    result.setdefault("profiles", {})[f"{name}/{variant}"] = text
                    print(f"== {name} {variant}\n{text}", flush=True)
        if args.trace:
            traced = {variant: _trace(step, args.warmup, args.trace, variant) for variant in ("plain", "loopcheck")}
            if rank == 0:
                text = _trace_table(traced, args.trace)
                result.setdefault("traces", {})[name] = text
                print(f"== {name} trace\n{text}", flush=True)
        del step
        if not args.cpu:
            torch.cuda.empty_cache()
    if rank == 0:
        print(table(result["results"], variants), flush=True)
        if args.out:
            Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
            Path(args.out + ".md").write_text(f"{result['meta']}\n\n" + table(result["results"], variants) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
