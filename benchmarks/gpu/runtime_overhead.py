"""Overhead of the runtime checker as a user sees it: ``python runtime_train.py`` against
``loopcheck run runtime_train.py`` and against the script with ``--watch``, each a separate
process, alternated in rounds (plain, run, watch, then the next round in rotated order) so
drift hits all alike. Per round the ratio to that round's plain run; the result is the median
ratio with the range of the rounds' ratios and a bootstrap 95% interval of the median.

Usage: python benchmarks/gpu/runtime_overhead.py --workload launch --rounds 5 --steps 400
       [--out OUT/overhead-launch.json]"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = str(HERE / "runtime_train.py")


def run(variant: str, workload: str, steps: int, warmup: int) -> dict:
    script = [TRAIN, "--workload", workload, "--steps", str(steps), "--warmup", str(warmup)]
    argv = {"plain": [sys.executable, *script],
            "run": [sys.executable, "-m", "loopcheck", "run", "-q", *script],
            "watch": [sys.executable, *script, "--watch"]}[variant]
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - start
    line = next((s for s in reversed(result.stdout.splitlines()) if s.startswith("{")), None)
    if result.returncode != 0 or line is None:
        raise SystemExit(f"{variant} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    data = json.loads(line)
    data["wall_s"] = wall
    data["findings_line"] = next((s for s in result.stderr.splitlines() if "finding" in s), "")
    return data


def summary(ratios: list[float]) -> dict:
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "bootstrap95": [medians[50], medians[1949]], "rounds": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="launch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--out")
    args = parser.parse_args()
    variants = ["plain", "run", "watch"]
    rows = []
    for r in range(args.rounds):
        order = variants[r % 3:] + variants[:r % 3]
        results = {v: run(v, args.workload, args.steps, args.warmup) for v in order}
        rows.append(results)
        print(f"round {r}: " + ", ".join(f"{v} {results[v]['ms_per_step']:.3f} ms/step, host "
                                         f"{results[v]['host_ms_per_step']:.3f} ms ({results[v]['wall_s']:.1f} s)"
                                         for v in variants), flush=True)
    result = {"workload": args.workload, "steps": args.steps, "warmup": args.warmup,
              "device": rows[0]["plain"]["device"], "rounds": rows}
    for v in ("run", "watch"):
        result[f"{v}_step_ratio"] = summary([row[v]["ms_per_step"] / row["plain"]["ms_per_step"] for row in rows])
        result[f"{v}_wall_ratio"] = summary([row[v]["wall_s"] / row["plain"]["wall_s"] for row in rows])
        # the host time loopcheck adds per step, as a share of plain's step time
        result[f"{v}_host_added"] = summary([(row[v]["host_ms_per_step"] - row["plain"]["host_ms_per_step"])
                                             / row["plain"]["ms_per_step"] + 1 for row in rows])
    result["plain_ms_per_step_median"] = statistics.median(row["plain"]["ms_per_step"] for row in rows)
    for v in ("run", "watch"):
        s = result[f"{v}_step_ratio"]
        print(f"{args.workload}: {v} / plain steady-state step time: median {100 * (s['median'] - 1):+.2f}% "
              f"(rounds {100 * (s['min'] - 1):+.2f}% .. {100 * (s['max'] - 1):+.2f}%, bootstrap 95% of the median "
              f"{100 * (s['bootstrap95'][0] - 1):+.2f}% .. {100 * (s['bootstrap95'][1] - 1):+.2f}%); plain "
              f"{result['plain_ms_per_step_median']:.3f} ms/step on {result['device']}", flush=True)
        h = result[f"{v}_host_added"]
        print(f"{args.workload}: {v}: host CPU time added per step, as a share of plain's step time: median "
              f"{100 * (h['median'] - 1):+.2f}% (bootstrap 95% {100 * (h['bootstrap95'][0] - 1):+.2f}% .. "
              f"{100 * (h['bootstrap95'][1] - 1):+.2f}%)", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
