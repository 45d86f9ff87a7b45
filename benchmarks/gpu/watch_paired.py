"""Overhead of ``watch()`` measured in one process: blocks of steps with and without the checker,
alternated, so that process-to-process differences (a launch-bound step varied 9.5-14.7 ms between
processes on one H200) drop out of the comparison.

The launch-bound workload of ``runtime_train.py`` (``make_step``: objects built once, before any
session, as a notebook or ``watch()`` user would). Each block: ``--warmup`` steps untimed (inside
``watch()`` these cover its first-16-windows inspection phase), then ``--steps`` timed steps between two device
synchronisations; the order of the two variants alternates per round. Prints each block and the
median of the per-round ratios, as JSON on the last line.

Usage: python benchmarks/gpu/watch_paired.py [--rounds 10] [--steps 300] [--warmup 40]"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_train import make_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=40)
    args = parser.parse_args()
    from loopcheck.runtime import watch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = make_step("launch", device, args.warmup + 2 * args.rounds * (args.warmup + args.steps))

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def block(checked: bool) -> tuple[float, float]:
        context = watch(summary=False) if checked else contextlib.nullcontext()
        with context:
            for _ in range(args.warmup):
                step()
            sync()
            start, host = time.perf_counter(), time.thread_time()
            for _ in range(args.steps):
                step()
            host = time.thread_time() - host
            sync()
            wall = time.perf_counter() - start
        return 1000 * wall / args.steps, 1000 * host / args.steps

    for _ in range(args.warmup):
        step()
    ratios, host_deltas = [], []
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        result = {checked: block(checked) for checked in order}
        (plain, plain_host), (checked, checked_host) = result[False], result[True]
        ratios.append(checked / plain - 1)
        host_deltas.append(checked_host - plain_host)
        print(f"round {r}: plain {plain:.3f} ms/step (host {plain_host:.3f}), watch {checked:.3f} ms/step "
              f"(host {checked_host:.3f}): {ratios[-1]:+.1%}", flush=True)
    summary = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "rounds": args.rounds,
               "steps": args.steps, "watch_over_plain_median": statistics.median(ratios),
               "watch_over_plain_min": min(ratios), "watch_over_plain_max": max(ratios),
               "host_ms_delta_median": statistics.median(host_deltas)}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
