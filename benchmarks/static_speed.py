"""Time ``loopcheck check`` against other static Python checkers on one path.

Reproduce (the exact commands behind benchmarks/results/static-speed*):

    python benchmarks/static_speed.py /work/corpus/speed --runs 5
    python benchmarks/static_speed.py /work/corpus/karpathy+nanoGPT/train.py --runs 10
    python benchmarks/static_speed.py /work/corpus/speed --cache --runs 5 --slow-runs 2
    python benchmarks/static_speed.py /work/corpus/broad --cache --runs 3 --ruff-ratio 1.5 --skip torchfix fixit

With ``--cache`` loopcheck is timed four ways (result cache and processes): cold with
``--no-cache`` on 1 and on 2 processes, cold filling an empty cache (emptied before every run),
and warm (re-run on the cache the warm-up filled); ratios are against the cold 2-process row,
and the report ends with the targets: cold within ``--ruff-ratio`` times ``ruff check --select
ALL`` (1.0 for the 475-file speed corpus, 1.5 for a broad corpus of many repositories; judged on
min wall times and, less sensitive to a shared machine's load, on CPU time), >= 30x faster than
TorchFix, warm under 0.5 s, peak memory under 300 MB (the sampled sum over every process of a run,
workers included). ``--slow-runs`` times TorchFix and Fixit fewer times and without a warm-up run
(the files are already in the page cache from the other tools). The other tools' timed runs are
interleaved, one round of each tool after another, so that a change of load hits them alike. The
report states the load average before and after: the machine may be shared, so compare min times.

ruff runs with ``--isolated``: the same rules on the same files in every repository of a corpus
(repositories carry ruff configurations of their own, and one that pins another ruff version
stops ruff with an error). Run this with bytecode caching on (``env -u PYTHONDONTWRITEBYTECODE``
where the environment turns it off): an installed loopcheck has its ``.pyc`` files.

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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

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
    env: dict[str, str] = field(default_factory=dict)  # on top of os.environ
    before_each: Callable[[], None] | None = None  # e.g. empty a cache directory
    slow: bool = False  # timed --slow-runs times, without a warm-up


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    total_rss_mib: float  # sampled peak of the sum over the run's processes
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


def group_rss_mib(pgid: int) -> float:
    """Resident memory of every process in process group ``pgid`` (Linux /proc), MiB."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{entry.name}/statm", "rb") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


def scan_output(out: BinaryIO) -> tuple[int, bool, str]:
    """Line count, whether a Python traceback was printed, and the last 4 KiB of a tool's output,
    read in chunks: holding ruff's 1M lines in this process would raise the peak RSS that later
    children inherit at fork."""
    marker = b"Traceback (most recent call last)"
    lines, traceback, tail = 0, False, b""
    while chunk := out.read(1 << 20):
        lines += chunk.count(b"\n")
        traceback = traceback or marker in tail[-len(marker):] + chunk
        tail = (tail + chunk)[-4096:]
    return lines, traceback, tail.decode(errors="replace")


def run_once(tool: Tool, target: Path, timeout_s: float) -> Run:
    """Run the tool once; time it, take its rusage from ``os.wait4`` and sample the memory of
    its whole process group every 20 ms."""
    if tool.before_each is not None:
        tool.before_each()
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*tool.cmd, str(target)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **tool.env},
        )
        killed = threading.Event()
        finished = threading.Event()
        peak = [0.0]

        def sample() -> None:
            while not finished.wait(0.02):
                peak[0] = max(peak[0], group_rss_mib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        def kill() -> None:
            killed.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        finished.set()
        sampler.join()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        out_lines, traceback, text = scan_output(out)
    crash = None
    if killed.is_set():
        crash = f"timeout after {timeout_s:g} s"
    elif code < 0:
        crash = f"killed by signal {-code}"
    elif traceback:
        crash = "traceback: " + text.strip().splitlines()[-1][:120]
    elif code not in tool.ok_codes:
        crash = f"exit {code}: " + (text.strip().splitlines() or [""])[-1][:120]
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mib=usage.ru_maxrss / 1024,  # Linux reports KiB
        total_rss_mib=max(peak[0], usage.ru_maxrss / 1024),
        exit_code=code,
        out_lines=out_lines,
        crash=crash,
    )


def bench(tool: Tool, target: Path, runs: int, timeout_s: float, slow_runs: int | None = None) -> Result:
    result = Result(tool, is_available(tool))
    if not result.available:
        return result
    if tool.slow and slow_runs is not None:
        result.runs = []
        for _ in range(slow_runs):
            result.runs.append(run_once(tool, target, timeout_s))
            if result.runs[-1].crash:
                break
        return result
    warm = run_once(tool, target, timeout_s)
    if warm.crash:
        result.runs = [warm]
        return result
    result.runs = [run_once(tool, target, timeout_s) for _ in range(runs)]
    return result


def interleaved(tools: list[Tool], target: Path, runs: int, timeout_s: float) -> list[Result]:
    """One untimed warm-up run of each tool, then ``runs`` rounds of one timed run of each."""
    results = [Result(tool, is_available(tool)) for tool in tools]
    live = [r for r in results if r.available]
    for res in live:
        print(f"warming up {res.tool.name} ...", file=sys.stderr, flush=True)
        warm = run_once(res.tool, target, timeout_s)
        if warm.crash:
            res.runs = [warm]
    for round_ in range(runs):
        print(f"round {round_ + 1} of {runs} ...", file=sys.stderr, flush=True)
        for res in live:
            if not res.crash:
                res.runs.append(run_once(res.tool, target, timeout_s))
    return results


def fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def report(results: list[Result], target: Path, n_files: int, n_lines: int, base_name: str = "loopcheck",
           load: str = "") -> str:
    base = next((r for r in results if r.tool.name == base_name), None)
    loop = base.median_wall() if base and base.available and not base.crash else None
    lines = [
        (
            f"Target: `{target}`: {n_files} .py files, {n_lines} lines; "
            f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs{load}"
        ),
        "",
        (
            f"| tool | command | status | exit | median wall s | min wall s "
            f"| {base_name}/tool (median) | median CPU s | peak RSS MiB (largest process) "
            f"| peak RSS MiB (all processes) | output lines |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        cmd = f"`{res.tool.command}`"
        if not res.available:
            lines.append(f"| {res.tool.name} | {cmd} | not installed |" + " |" * 8)
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
            f"| {fmt(max(r.total_rss_mib for r in runs), 1)} "
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


def targets(results: list[Result], ruff_ratio: float = 1.0) -> str:
    """The targets, judged on min wall times (the machine may be shared) and on CPU time."""
    by_name = {r.tool.name: r for r in results if r.available and r.runs and not r.crash}

    def best(name: str) -> float | None:
        res = by_name.get(name)
        return min(r.wall_s for r in res.runs) if res else None

    cold, warm = best(COLD), best(WARM)
    torchfix, ruff = best("TorchFix"), best("ruff ALL")
    peak = max((r.total_rss_mib for n, res in by_name.items() if n.startswith("loopcheck") for r in res.runs),
               default=None)
    rows = ["", "Targets (min wall times):", ""]

    def verdict(ok: bool) -> str:
        return "meets" if ok else "MISSES"

    if cold is not None and torchfix is not None:
        rows.append(f"- cold vs TorchFix: {torchfix / cold:.1f}x faster ({verdict(torchfix / cold >= 30)} >= 30x)")
    if cold is not None and ruff is not None:
        rows.append(f"- cold vs `ruff check --select ALL`: {cold / ruff:.2f}x its time "
                    f"({verdict(cold <= ruff_ratio * ruff)} <= {ruff_ratio:g}x)")
        cpu = {name: statistics.median(r.cpu_s for r in by_name[name].runs) for name in (COLD, "ruff ALL")}
        rows.append(f"- CPU time, cold vs ruff (medians): {cpu[COLD]:.2f} s vs {cpu['ruff ALL']:.2f} s = "
                    f"{cpu[COLD] / cpu['ruff ALL']:.2f}x ({verdict(cpu[COLD] <= ruff_ratio * cpu['ruff ALL'])} "
                    f"<= {ruff_ratio:g}x)")
    if warm is not None:
        rows.append(f"- warm (cached) re-run: {warm:.3f} s ({verdict(warm < 0.5)} < 0.5 s)")
    if peak is not None:
        rows.append(f"- peak memory of a loopcheck run, all processes: {peak:.1f} MiB "
                    f"({verdict(peak * 2**20 < 300e6)} < 300 MB)")
    return "\n".join(rows)


COLD, WARM = "loopcheck cold, 2 processes", "loopcheck warm (cached)"


# loopcheck with the project-wide facts switched off (``loopcheck.project.for_file`` returns None):
# the difference to the cold row is what reading the other modules of each project costs.
NO_PROJECT = ("python -c \"import sys, loopcheck.project as p; p.for_file = lambda *a, **k: None; "
              "from loopcheck.cli import main; sys.exit(main(sys.argv[1:]))\" check")


def loopcheck_tools(command: str, cache: bool, project_cost: bool = False) -> list[Tool]:
    """loopcheck once (the default run), or cold/warm x 1/2 processes with ``--cache``;
    ``project_cost``: also cold without the project-wide facts."""
    if not cache:
        return [Tool("loopcheck", command)]
    extra = [Tool("loopcheck cold, 2 processes, no project facts", f"{NO_PROJECT} --no-cache --jobs 2")] \
        if project_cost else []
    warm_dir = Path(tempfile.mkdtemp(prefix="loopcheck-bench-warm-"))
    fill_dir = Path(tempfile.mkdtemp(prefix="loopcheck-bench-fill-"))

    def empty_fill_dir() -> None:
        shutil.rmtree(fill_dir, ignore_errors=True)
        fill_dir.mkdir()

    return [
        Tool("loopcheck cold, 1 process", f"{command} --no-cache --jobs 1"),
        Tool(COLD, f"{command} --no-cache --jobs 2"),
        Tool("loopcheck cold, filling the cache", f"{command} --jobs 2", env={"LOOPCHECK_CACHE_DIR": str(fill_dir)},
             before_each=empty_fill_dir),
        Tool(WARM, f"{command} --jobs 2", env={"LOOPCHECK_CACHE_DIR": str(warm_dir)}),
        *extra,
    ]


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path, help="directory or single .py file")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per tool")
    ap.add_argument("--slow-runs", type=int, default=None,
                    help="timed runs of TorchFix and Fixit, without warm-up (default: --runs, with warm-up)")
    ap.add_argument("--cache", action="store_true",
                    help="time loopcheck cold (--no-cache) on 1 and 2 processes, filling a cache, and warm")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--loopcheck-cmd", default="loopcheck check")
    ap.add_argument("--torchfix-cmd", default="torchfix")
    ap.add_argument("--fixit-cmd", default="fixit lint")
    ap.add_argument("--ruff-cmd", default="ruff check --isolated --select ALL --no-cache")
    ap.add_argument("--project-cost", action="store_true",
                    help="with --cache: also time a cold run without the project-wide facts")
    ap.add_argument("--ruff-ratio", type=float, default=1.0,
                    help="target: cold loopcheck within this many times ruff's time (default 1.0)")
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
        *loopcheck_tools(args.loopcheck_cmd, args.cache, args.project_cost),
        Tool("ruff ALL", args.ruff_cmd),
        Tool("TorchFix", args.torchfix_cmd, slow=True),
        Tool("Fixit", args.fixit_cmd, slow=True),
    ]
    skip = {name.lower() for name in args.skip}
    tools = [t for t in tools if t.name.split()[0].lower() not in skip]
    files = python_files(args.target)
    load_before = load_average()
    results = interleaved([t for t in tools if not t.slow], args.target, args.runs, args.timeout)
    for tool in [t for t in tools if t.slow]:
        print(f"timing {tool.name} ...", file=sys.stderr, flush=True)
        results.append(bench(tool, args.target, args.runs, args.timeout, args.slow_runs))
    load = f"; load average (1/5/15 min) {load_before} before, {load_average()} after"
    print(report(results, args.target, len(files), count_lines(files), COLD if args.cache else "loopcheck", load))
    if args.cache:
        print(targets(results, args.ruff_ratio))
    return 1 if any(r.crash for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
