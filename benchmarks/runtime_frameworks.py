"""The framework matrix: every scenario of ``runtime/frameworks/`` run as the tests run them
(``tests/frameworks/conftest.py``: ``loopcheck run``, plain python for the ``*_ok`` ones, torchrun
on 2 CPU ranks where the scenario asks), with what each should give and what it gave.

    python benchmarks/runtime_frameworks.py [--markdown PATH]

Prints the table (Markdown) and the wall time of the whole matrix (2 jobs at a time)."""
from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.frameworks.conftest import _jobs, _run, missing_modules  # noqa: E402
from tests.frameworks.scenarios import all_scenarios, counter_problems, findings_of  # noqa: E402

PACKAGES = {"hf": "transformers", "accelerate": "accelerate", "lightning": "lightning", "timm": "timm"}


def _version(framework: str) -> str:
    try:
        return importlib.metadata.version(PACKAGES[framework])
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _findings(found: set) -> str:
    return ", ".join(f"{code} {name}:{line}" for name, code, line in sorted(found, key=lambda f: (f[0], f[2]))) or "none"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    scenarios = all_scenarios()
    with tempfile.TemporaryDirectory() as tmp:
        jobs = _jobs(scenarios, Path(tmp))
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {key: pool.submit(_run, *jobs[key]) for key in sorted(jobs, key=lambda k: k[1] != "2proc")}
        runs = {key: f.result() for key, f in futures.items()}
        wall = time.perf_counter() - start
    rows = ["| framework | version | scenario | run | expected | observed | counters (expected: problems) | exit |",
            "|---|---|---|---|---|---|---|---|"]
    for s in scenarios:
        if missing_modules(s):
            rows.append(f"| {s.framework} | not installed | {s.name} | skipped | | | | |")
            continue
        for kind, items in (("watch" if s.watch else "run", s.counters), ("2proc", s.distributed)):
            run = runs.get((s.name, kind))
            if run is None:
                continue
            problems = counter_problems(run.report, items) if run.report else ["no report"]
            pending = f"; pending: {', '.join(s.pending)}" if s.pending else ""
            label = {"run": "loopcheck run", "watch": "watch()", "2proc": "torchrun x2"}[kind]
            rows.append(f"| {s.framework} | {_version(s.framework)} | {s.name} | {label} | "
                        f"{_findings(set(s.expected))} | {_findings(findings_of(run.report)) if run.report else 'no report'} | "
                        f"{', '.join(items)}: {'; '.join(problems) or 'all right'}{pending} | {run.exit_code} |")
        plain = runs.get((s.name, "python"))
        if plain is not None:
            checked = runs[(s.name, "run")]
            same = plain.stdout.splitlines()[-1:] == checked.stdout.splitlines()[-1:]
            rows.append(f"| {s.framework} | {_version(s.framework)} | {s.name} | python | | | "
                        f"last stdout line {'identical' if same else 'DIFFERENT'} under loopcheck run | {plain.exit_code} |")
    text = "\n".join(rows) + f"\n\nWall time of the whole matrix, 2 jobs at a time: {wall:.0f} s\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
