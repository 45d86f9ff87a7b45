"""CPU seconds of building the training-loop model and running the rules on a corpus, without a
profiler: every file ``loopcheck check --no-cache`` would send to a worker is checked in this one
process, and the time inside ``loopcheck.model.build`` and inside the rules is summed apart from
the rest (reading, screening, project facts loaded up front, libcst parsing, positions).

Run it once per checkout, side by side in rounds (the checkout is whatever ``loopcheck`` imports,
so set PYTHONPATH)::

    for r in 1 2 3; do for c in /work/main .; do
        PYTHONPATH=$c python benchmarks/model_cost.py /work/corpus/broad --label $c; done; done

The last column is a digest of every finding (file, line, column, code, message): equal digests
mean identical findings.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import time
from pathlib import Path

import loopcheck
from loopcheck import checker, engine
from loopcheck import model as model_package
from loopcheck.config import Config
from loopcheck.discovery import discover
from loopcheck.engine import text_tests
from loopcheck.selection import resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--label", default=str(Path(loopcheck.__file__).parent.parent))
    args = parser.parse_args(argv)
    os.chdir(args.target)
    codes = resolve()
    config = Config(root=Path.cwd())
    files = discover([Path(".")], config.root, [], True).files
    importlib.import_module("loopcheck.positions")  # imported by the workers before the files are read

    _, todo, _ = checker._read(files, codes, config, None, text_tests(codes), None)
    spent = {"build": 0.0, "findings": 0.0}
    build, findings_of = model_package.build, engine._findings

    def timed_build(*a, **k):  # type: ignore[no-untyped-def]
        start = time.process_time()
        try:
            return build(*a, **k)
        finally:
            spent["build"] += time.process_time() - start

    def timed_findings(*a, **k):  # type: ignore[no-untyped-def]
        start = time.process_time()
        try:
            return findings_of(*a, **k)
        finally:
            spent["findings"] += time.process_time() - start

    check, checks = engine._check, [0.0]

    def timed_check(*a, **k):  # type: ignore[no-untyped-def]
        start = time.process_time()
        try:
            return check(*a, **k)
        finally:
            checks[0] += time.process_time() - start

    model_package.build, engine._findings, engine._check = timed_build, timed_findings, timed_check
    digest = hashlib.sha256()
    count = 0
    start = time.process_time()
    for job in todo:
        for finding in checker._check_job(job)[0]:
            count += 1
            digest.update(f"{finding.filename}:{finding.line}:{finding.col}:{finding.code}:{finding.message}\n"
                          .encode())
    total = time.process_time() - start
    rules = checks[0] - spent["build"] - spent["findings"]
    print(f"{args.label}\tfiles {len(todo)}\tcheck {total:.2f}\tbuild {spent['build']:.2f}\trules {rules:.2f}"
          f"\tmodel+rules {spent['build'] + rules:.2f}\tfindings {count}\t{digest.hexdigest()[:12]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
