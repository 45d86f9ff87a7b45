"""Warm re-run and single-file times of two or more loopcheck checkouts, side by side in rounds.

On a shared machine only runs that alternate compare: each round runs every checkout once per
measurement, in turn. Measurements (CPU = user + system of the command and its worker processes):

- ``warm``: ``loopcheck check --jobs 2 .`` in CORPUS twice on a fresh cache; the second run is timed;
- ``single``: ``loopcheck check --no-cache FILE``, without bytecode files (``PYTHONDONTWRITEBYTECODE=1``,
  this machine's setting) and with them (a normal install; written under a temporary
  ``PYTHONPYCACHEPREFIX`` by an untimed first run, so no checkout is touched).

    python benchmarks/static_speed_rounds.py --rounds 5 main=/work/main new=. \\
        --corpus /work/corpus/speed --file /work/corpus/karpathy+nanoGPT/train.py
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds of the command and its children, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="NAME=PATH: a checkout whose loopcheck package is measured")
    parser.add_argument("--corpus", type=Path, default=Path("/work/corpus/speed"))
    parser.add_argument("--file", type=Path, default=Path("/work/corpus/karpathy+nanoGPT/train.py"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    checkouts = [(name, Path(path).resolve()) for name, path in (c.split("=", 1) for c in args.checkouts)]
    scratch = Path(tempfile.mkdtemp(prefix="lc-rounds-"))
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    print(f"load average before: {os.getloadavg()}")
    for name, path in checkouts:  # bytecode for the `single, bytecode` runs
        env = {**os.environ, "PYTHONPATH": str(path), "PYTHONPYCACHEPREFIX": str(scratch / f"pyc-{name}")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        timed([sys.executable, "-m", "loopcheck", "check", "--no-cache", str(args.file)], args.file.parent, env)
    for round_ in range(args.rounds):
        for name, path in checkouts:
            base = {**os.environ, "PYTHONPATH": str(path)}
            cache = {**base, "LOOPCHECK_CACHE_DIR": str(scratch / f"cache-{name}-{round_}")}
            command = [sys.executable, "-m", "loopcheck", "check", "--jobs", "2", "."]
            timed(command, args.corpus, cache)  # fills the cache
            results.setdefault((name, "warm"), []).append(timed(command, args.corpus, cache))
            single = [sys.executable, "-m", "loopcheck", "check", "--no-cache", str(args.file)]
            plain = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
            results.setdefault((name, "single, no bytecode"), []).append(timed(single, args.file.parent, plain))
            pyc = {**base, "PYTHONPYCACHEPREFIX": str(scratch / f"pyc-{name}")}
            pyc.pop("PYTHONDONTWRITEBYTECODE", None)
            results.setdefault((name, "single, bytecode"), []).append(timed(single, args.file.parent, pyc))
    print(f"load average after: {os.getloadavg()}")
    print("| measurement | checkout | CPU s per round | median CPU s | wall s per round | median wall s |")
    print("|---|---|---|---|---|---|")
    for what in ("warm", "single, no bytecode", "single, bytecode"):
        for name, _ in checkouts:
            runs = results[(name, what)]
            cpu, wall = [c for c, _ in runs], [w for _, w in runs]
            print(f"| {what} | {name} | {' / '.join(f'{c:.2f}' for c in cpu)} | {statistics.median(cpu):.2f} | "
                  f"{' / '.join(f'{w:.2f}' for w in wall)} | {statistics.median(wall):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
