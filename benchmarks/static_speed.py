"""Time ``loopcheck check`` against other static Python checkers on one path.

Reproduce (the exact commands behind benchmarks/results/static-speed*):

    python benchmarks/static_speed.py /work/corpus/speed --runs 5
    python benchmarks/static_speed.py /work/corpus/karpathy+nanoGPT/train.py --runs 10

TARGET is a directory or a single file. Every tool runs as a subprocess on the
same TARGET: one untimed warm-up run, then ``--runs`` timed runs. The report
is a markdown table with median and min wall time, the ratio
loopcheck/tool of the medians, median CPU time (user+sys, children included)
and the peak RSS of the largest single process of a run (``os.wait4``
rusage, so for tools that fan out to worker processes it is the biggest
worker, not the sum).

A non-zero exit because of findings is normal. A run counts as a crash when
it is killed by a signal, times out, prints a Python traceback, or exits with
an exit code other than 0 or 1 (``Tool.ok_codes``).

Tools that are not installed (``CMD --help`` fails) are listed and skipped:
TorchFix (``torchfix``), Fixit (``fixit lint``) and ``ruff check --select ALL
--no-cache``. Their commands, and loopcheck's, are configurable, e.g.
``--loopcheck-cmd "python -m loopcheck check"``; a leading ``python`` is
replaced by this interpreter. Benchmark-only tools may live in another
virtualenv; put its ``bin`` at the end of PATH or pass the full command.

For a single file the loopcheck row is also checked against the target of
one typical training script in under 0.3 s, start-up included.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SINGLE_FILE_TARGET_S = 0.3


@dataclass
class Tool:
    name: str
    command: str  # as given on the command line, for the report

    @property
    def cmd(self) -> list[str]:
        parts = shlex.split(self.command)
        if parts and parts[0] in ("python", "python3"):
            parts[0] = sys.executable
        return parts

    ok_codes: frozenset[int] = frozenset({0, 1})


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    exit_code: int
    out_lines: int
    crash: str | None


@dataclass
class Result:
    tool: Tool
    available: bool
    runs: list[Run] = field(default_factory=list)

    @property
    def crash(self) -> str | None:
        return next((r.crash for r in self.runs if r.crash), None)

    def median_wall(self) -> float | None:
        return statistics.median(r.wall_s for r in self.runs) if self.runs else None


def python_files(target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    return sorted(p for p in target.rglob("*.py") if p.is_file())


def count_lines(files: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


def is_available(tool: Tool) -> bool:
    try:
        proc = subprocess.run(
            [*tool.cmd, "--help"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def run_once(tool: Tool, target: Path, timeout_s: float) -> Run:
    """Run the tool once; time it and take its rusage from ``os.wait4``."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*tool.cmd, str(target)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    crash = None
    if killed.is_set():
        crash = f"timeout after {timeout_s:g} s"
    elif code < 0:
        crash = f"killed by signal {-code}"
    elif "Traceback (most recent call last)" in text:
        crash = "traceback: " + text.strip().splitlines()[-1][:120]
    elif code not in tool.ok_codes:
        crash = f"exit {code}: " + (text.strip().splitlines() or [""])[-1][:120]
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mib=usage.ru_maxrss / 1024,  # Linux reports KiB
        exit_code=code,
        out_lines=text.count("\n"),
        crash=crash,
    )


def bench(tool: Tool, target: Path, runs: int, timeout_s: float) -> Result:
    result = Result(tool, is_available(tool))
    if not result.available:
        return result
    warm = run_once(tool, target, timeout_s)
    if warm.crash:
        result.runs = [warm]
        return result
    result.runs = [run_once(tool, target, timeout_s) for _ in range(runs)]
    return result


def fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def report(results: list[Result], target: Path, n_files: int, n_lines: int) -> str:
    base = next((r for r in results if r.tool.name == "loopcheck"), None)
    loop = base.median_wall() if base and base.available and not base.crash else None
    lines = [
        (
            f"Target: `{target}`: {n_files} .py files, {n_lines} lines; "
            f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
        ),
        "",
        (
            "| tool | command | status | exit | median wall s | min wall s "
            "| loopcheck/tool | median CPU s | peak RSS MiB | output lines |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        cmd = f"`{res.tool.command}`"
        if not res.available:
            lines.append(f"| {res.tool.name} | {cmd} | not installed |" + " |" * 7)
            continue
        runs = res.runs
        med = res.median_wall()
        ratio = loop / med if loop is not None and med and not res.crash else None
        status = f"CRASH ({res.crash})" if res.crash else f"ok ({len(runs)} runs)"
        lines.append(
            f"| {res.tool.name} | {cmd} | {status} "
            f"| {','.join(sorted({str(r.exit_code) for r in runs}))} "
            f"| {fmt(med)} | {fmt(min(r.wall_s for r in runs))} | {fmt(ratio, 2)} "
            f"| {fmt(statistics.median(r.cpu_s for r in runs))} "
            f"| {fmt(max(r.max_rss_mib for r in runs), 1)} "
            f"| {max(r.out_lines for r in runs)} |"
        )
    if target.is_file() and loop is not None:
        verdict = "meets" if loop < SINGLE_FILE_TARGET_S else "MISSES"
        lines += [
            "",
            (
                f"Single file: loopcheck median {loop:.3f} s {verdict} "
                f"the {SINGLE_FILE_TARGET_S} s target."
            ),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path, help="directory or single .py file")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per tool")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--loopcheck-cmd", default="loopcheck check")
    ap.add_argument("--torchfix-cmd", default="torchfix")
    ap.add_argument("--fixit-cmd", default="fixit lint")
    ap.add_argument("--ruff-cmd", default="ruff check --select ALL --no-cache")
    ap.add_argument(
        "--skip",
        nargs="+",
        default=[],
        metavar="TOOL",
        help="tools to leave out: loopcheck torchfix fixit ruff",
    )
    args = ap.parse_args(argv)

    if not args.target.exists():
        ap.error(f"{args.target} does not exist")
    tools = [
        Tool("loopcheck", args.loopcheck_cmd),
        Tool("TorchFix", args.torchfix_cmd),
        Tool("Fixit", args.fixit_cmd),
        Tool("ruff ALL", args.ruff_cmd),
    ]
    skip = {name.lower() for name in args.skip}
    tools = [t for t in tools if t.name.split()[0].lower() not in skip]
    files = python_files(args.target)
    results = []
    for tool in tools:
        print(f"timing {tool.name} ...", file=sys.stderr, flush=True)
        results.append(bench(tool, args.target, args.runs, args.timeout))
    print(report(results, args.target, len(files), count_lines(files)))
    return 1 if any(r.crash for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
