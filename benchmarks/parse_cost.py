"""CPU seconds of the per-file stages of ``loopcheck check`` on a corpus, without a profiler: every
file ``loopcheck check --no-cache`` would send to a worker is checked in this one process, and the
time inside the ast screen, the libcst parse, the model build and the rest is summed, with how many
files and how much text each stage saw.

Run it once per checkout, side by side in rounds (the checkout is whatever ``loopcheck`` imports,
so set PYTHONPATH)::

    for r in 1 2; do for c in /work/main .; do
        PYTHONPATH=$c python benchmarks/parse_cost.py /work/corpus/broad --label $c; done; done

The last column is a digest of every finding (file, line, column, code, message): equal digests
mean identical findings. ``--files out.tsv`` writes one line per file (screen verdict, characters
given to libcst, CPU of each stage).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import time
from collections import Counter
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
    parser.add_argument("--files", type=Path, help="write one line per checked file here")
    args = parser.parse_args(argv)
    os.chdir(args.target)
    codes = resolve()
    config = Config(root=Path.cwd())
    files = discover([Path(".")], config.root, [], True).files
    importlib.import_module("loopcheck.positions")  # imported by the workers before the files are read
    importlib.import_module("loopcheck.model")

    _, todo, _ = checker._read(files, codes, config, None, text_tests(codes), None)
    spent: Counter[str] = Counter()
    row: dict[str, object] = {}

    def timed(name, function, note=None):  # type: ignore[no-untyped-def]
        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            start = time.process_time()
            try:
                result = function(*a, **k)
            finally:
                took = time.process_time() - start
                spent[name] += took
                row[name] = row.get(name, 0.0) + took  # type: ignore[operator]
            if note is not None:
                note(a, result)
            return result
        return wrapper

    def note_screen(a, result):  # type: ignore[no-untyped-def]
        row.setdefault("verdict", result.verdict.name)

    def note_parse(a, result):  # type: ignore[no-untyped-def]
        row["parsed"] = row.get("parsed", 0) + len(a[0])  # type: ignore[operator]
        spent["parsed chars"] += len(a[0])
        spent["parses"] += 1

    engine.screen = timed("screen", engine.screen, note_screen)
    engine.parse_module = timed("libcst parse", engine.parse_module, note_parse)
    model_package.build = timed("model build", model_package.build)
    engine.LazyProject.load = timed("project facts", engine.LazyProject.load)
    engine._findings = timed("positions+findings", engine._findings)
    digest = hashlib.sha256()
    count = 0
    lines = []
    start = time.process_time()
    for job in todo:
        row.clear()
        begin = time.process_time()
        for finding in checker._check_job(job)[0]:
            count += 1
            digest.update(f"{finding.filename}:{finding.line}:{finding.col}:{finding.code}:{finding.message}\n"
                          .encode())
        row["total"] = time.process_time() - begin
        verdict = row.get("verdict", "-")
        spent[f"files {verdict}"] += 1
        lines.append("\t".join([job[1], str(verdict), str(len(job[0])), str(row.get("parsed", 0)),
                                *(f"{row.get(k, 0.0):.4f}" for k in ("screen", "libcst parse", "model build",
                                                                     "project facts", "total"))]))
    total = time.process_time() - start
    if args.files:
        args.files.write_text("file\tverdict\tchars\tparsed\tscreen\tparse\tbuild\tfacts\ttotal\n"
                              + "\n".join(lines) + "\n")
    stages = "\t".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(spent.items()))
    print(f"{args.label}\tfiles {len(todo)}\tcheck {total:.2f}\t{stages}\tfindings {count}\t{digest.hexdigest()[:12]}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
