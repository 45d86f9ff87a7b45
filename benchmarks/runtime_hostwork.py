"""Host work the runtime checker adds per optimizer step, counted deterministically on the CPU:
Python function calls (cProfile) per optimizer step in steady state, in loopcheck's own code and
in total, for the launch-bound loop of ``benchmarks/gpu/runtime_train.py`` (4 micro-batches,
autocast + GradScaler + unscale_ + clip + scheduler). Counts, not times: they do not depend on
the machine's load, so a change on the hot path shows as a change in calls.

Usage: python benchmarks/runtime_hostwork.py [--steps 256] [--out benchmarks/results/runtime-hostwork.md]"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from loopcheck.runtime import watch

ACCUM = 4


def make_step():
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(64, 64), nn.GELU())], nn.Linear(64, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    data = [(torch.randn(8, 64), torch.randint(0, 10, (8,))) for _ in range(ACCUM)]

    def step() -> None:
        for x, y in data:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y) / ACCUM
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def profile(checked: bool, warmup: int, steps: int) -> pstats.Stats:
    step = make_step()
    context = watch(summary=False) if checked else None
    if context is not None:
        context.__enter__()
    try:
        for _ in range(warmup):  # past the first 16 windows, where every loss is inspected
            step()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(steps):
            step()
        profiler.disable()
    finally:
        if context is not None:
            context.__exit__(None, None, None)
    return pstats.Stats(profiler)


def calls(stats: pstats.Stats, inside: str | None = None) -> dict[str, int]:
    out = {}
    for (file, line, name), (_, ncalls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        if inside is None or inside in file:
            out[f"{Path(file).name}:{line}:{name}" if inside else name] = ncalls
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=136)
    parser.add_argument("--out")
    args = parser.parse_args()
    plain = profile(False, args.warmup, args.steps)
    checked = profile(True, args.warmup, args.steps)
    ours = calls(checked, "loopcheck/runtime")
    total_plain, total_checked = sum(calls(plain).values()), sum(calls(checked).values())
    per = args.steps
    lines = ["# Host work of the runtime checker per optimizer step (CPU, deterministic call counts)", "",
             f"`python benchmarks/runtime_hostwork.py --steps {args.steps} --warmup {args.warmup}` "
             f"(torch {torch.__version__}, Python {sys.version.split()[0]}); loop: 4 micro-batches, "
             "autocast + GradScaler + unscale_ + clip + scheduler; counted after the first "
             f"{args.warmup} steps.", "",
             f"- Python function calls per optimizer step, whole process: plain {total_plain / per:.1f}, "
             f"under watch() {total_checked / per:.1f} (+{(total_checked - total_plain) / per:.1f})",
             f"- of which in loopcheck/runtime: {sum(ours.values()) / per:.1f} per step", "",
             "| calls per step | loopcheck function |", "|---:|---|"]
    for name, n in sorted(ours.items(), key=lambda kv: -kv[1])[:25]:
        lines.append(f"| {n / per:.2f} | `{name}` |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
