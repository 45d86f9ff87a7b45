"""Where ``loopcheck check`` spends its time on a corpus: every file it would send to a worker is
checked in this one process under ``cProfile`` (no cache, default rules), and the top functions
by cumulative and by own time are printed; the per-stage CPU seconds (read and pre-filter, ast
screen, project facts, libcst parse, model, rules, positions) follow.

    python benchmarks/static_profile.py /work/corpus/broad --top 40 [--stats /tmp/broad.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

from loopcheck import checker
from loopcheck.config import Config
from loopcheck.discovery import discover
from loopcheck.engine import text_tests
from loopcheck.selection import resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--stats", type=Path, help="also write the raw profile here")
    args = parser.parse_args(argv)
    os.chdir(args.target)
    codes = resolve()
    config = Config(root=Path.cwd())
    start = time.process_time()
    files = discover([Path(".")], config.root, [], True).files
    import loopcheck.model  # noqa: F401  (imported by the workers before the files are read)
    import loopcheck.positions  # noqa: F401

    _, todo, _ = checker._read(files, codes, config, None, text_tests(codes), None)
    read = time.process_time() - start
    profile = cProfile.Profile()
    start = time.process_time()
    profile.enable()
    findings = 0
    for job in todo:
        findings += len(checker._check_job(job)[0])
    profile.disable()
    checked = time.process_time() - start
    print(f"{len(files)} files, {len(todo)} checked, {findings} findings; CPU s: discover+read+pre-filter "
          f"{read:.2f}, checking {checked:.2f} (under the profiler)")
    stats = pstats.Stats(profile, stream=sys.stdout)
    if args.stats:
        stats.dump_stats(str(args.stats))
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
