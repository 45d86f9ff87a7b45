"""The fix-then-run harness as a report: every safe fix of a runnable script, verified by running it.

Reproduce (the command behind benchmarks/results/fix-then-run.md):

    python benchmarks/fix_then_run.py

The same harness as tests/test_fix_then_run.py (tests/fix_then_run.py): the CPU scenarios of
``runtime/`` and the real-code shapes of ``tests/fixtures/fix_then_run/`` with a safe static fix are
copied, fixed with ``loopcheck check --fix`` and run under ``loopcheck run`` beside their originals.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fix_then_run import prepare, problems, run_all  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:  # DataLoader workers may linger
        start = time.perf_counter()
        cases = prepare(Path(tmp))
        runs = run_all(cases, Path(tmp))
        elapsed = time.perf_counter() - start
    verified = sum(c.applied for c in cases if not problems(c, runs))
    print(f"{verified} of {sum(c.applied for c in cases)} safe fixes verified by running the fixed script "
          f"({len(cases)} scripts, {elapsed:.0f} s)\n")
    print("| script | fixes | fixed codes | runtime before (exit) | runtime after (exit) | verdict |")
    print("|---|---:|---|---|---|---|")
    for c in cases:
        before, after = runs[(c.name, "original")], runs[(c.name, "fixed")]
        verdict = "; ".join(p.splitlines()[0] for p in problems(c, runs)) or "verified"
        print(f"| {c.name} | {c.applied} | {', '.join(sorted(c.fixed_codes))} | "
              f"{', '.join(sorted(before.codes)) or '-'} ({before.exit_code}) | "
              f"{', '.join(sorted(after.codes)) or '-'} ({after.exit_code}) | {verdict} |")


if __name__ == "__main__":
    main()
