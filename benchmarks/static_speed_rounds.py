"""Cold, warm and single-file times of two or more loopcheck checkouts (and ruff), side by side in rounds.

On a shared machine only runs that alternate compare: each round runs every checkout once per
measurement, in turn. Measurements (CPU = user + system of the command and its worker processes):

- ``cold``: ``loopcheck check --no-cache --jobs 2 .`` in CORPUS; with ``--ruff``, ruff's
  ``check --isolated --select ALL --no-cache .`` in the same round, right after each checkout;
- ``warm``: ``loopcheck check --jobs 2 .`` in CORPUS twice on a fresh cache; the second run is timed;
- ``single``: ``loopcheck check --no-cache FILE``, without bytecode files (``PYTHONDONTWRITEBYTECODE=1``,
  this machine's setting) and with them (a normal install).

Every run but ``single, no bytecode`` reads and writes bytecode under a temporary
``PYTHONPYCACHEPREFIX`` (filled by an untimed first run), so no checkout is touched and none has an
advantage from bytecode files lying in its tree.

    python benchmarks/static_speed_rounds.py --rounds 5 main=/work/main new=. --ruff ruff \\
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


MEASUREMENTS = ["cold", "warm", "single"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="NAME=PATH: a checkout whose loopcheck package is measured")
    parser.add_argument("--corpus", type=Path, default=Path("/work/corpus/speed"))
    parser.add_argument("--file", type=Path, default=Path("/work/corpus/karpathy+nanoGPT/train.py"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ruff", help="also time this ruff executable on CORPUS in each round")
    parser.add_argument("--only", nargs="+", choices=MEASUREMENTS, default=MEASUREMENTS, help="measure only these")
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
            pyc = {**base, "PYTHONPYCACHEPREFIX": str(scratch / f"pyc-{name}")}
            pyc.pop("PYTHONDONTWRITEBYTECODE", None)
            if "cold" in args.only:
                cold = [sys.executable, "-m", "loopcheck", "check", "--no-cache", "--jobs", "2", "."]
                results.setdefault((name, "cold"), []).append(timed(cold, args.corpus, pyc))
                if args.ruff:
                    ruff = [args.ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "."]
                    results.setdefault(("ruff", f"cold (after {name})"), []).append(timed(ruff, args.corpus, base))
            if "warm" in args.only:
                cache = {**pyc, "LOOPCHECK_CACHE_DIR": str(scratch / f"cache-{name}-{round_}")}
                command = [sys.executable, "-m", "loopcheck", "check", "--jobs", "2", "."]
                timed(command, args.corpus, cache)  # fills the cache
                results.setdefault((name, "warm"), []).append(timed(command, args.corpus, cache))
            if "single" in args.only:
                single = [sys.executable, "-m", "loopcheck", "check", "--no-cache", str(args.file)]
                plain = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
                results.setdefault((name, "single, no bytecode"), []).append(timed(single, args.file.parent, plain))
                results.setdefault((name, "single, bytecode"), []).append(timed(single, args.file.parent, pyc))
    print(f"load average after: {os.getloadavg()}")
    print("| measurement | checkout | CPU s per round | median CPU s | wall s per round | median wall s |")
    print("|---|---|---|---|---|---|")
    rows = [(name, what) for what in ("cold", "warm", "single, no bytecode", "single, bytecode")
            for name, _ in checkouts] + [key for key in results if key[0] == "ruff"]
    for name, what in rows:
        if (name, what) in results:
            runs = results[(name, what)]
            cpu, wall = [c for c, _ in runs], [w for _, w in runs]
            print(f"| {what} | {name} | {' / '.join(f'{c:.2f}' for c in cpu)} | {statistics.median(cpu):.2f} | "
                  f"{' / '.join(f'{w:.2f}' for w in wall)} | {statistics.median(wall):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
