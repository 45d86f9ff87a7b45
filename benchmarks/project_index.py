"""What the project-wide facts cost: ``loopcheck check`` of a repository with and without them.

For each repository given, in fresh processes (3 rounds, the median kept), in CPU seconds (user +
system of the command and its worker processes: steadier than wall time on a shared machine):

- ``off``: ``loopcheck check`` (empty cache) with ``loopcheck.project.for_file`` replaced by a stub
  that returns None (no project facts), as loopcheck ran before they existed;
- ``cold``: ``loopcheck check`` with an empty cache directory (facts read with ``ast`` and stored);
- ``facts warm``: the project facts and cache digests of every candidate file again, from the facts
  cache, in a new process (what a warm ``loopcheck check`` pays before it finds every result in the
  result cache);
- ``modules read``: how many project files the cold check parsed with ``ast`` for their facts (the
  candidate files, the modules whose functions a loop calls, the entry scripts that wrap DDP).

Usage: ``python benchmarks/project_index.py /work/corpus/huggingface+diffusers ...`` (a checkout
outside any git work tree, so ``.gitignore`` rules do not hide it).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_OFF = ("import sys, loopcheck.project as p; p.for_file = lambda *a, **k: None; from loopcheck.cli import main; "
        "sys.exit(main(['check', '-q', '--exit-zero', '--no-show-source', '.']))")
_ON = ("import sys; from loopcheck.cli import main; "
       "sys.exit(main(['check', '-q', '--exit-zero', '--no-show-source', '.']))")
_FACTS = """
import json, sys, time
from pathlib import Path
from loopcheck.checker import _check_job  # noqa: F401  (the same imports as a real run)
from loopcheck.discovery import discover
from loopcheck.engine import required_texts
from loopcheck.project import for_file
from loopcheck.selection import resolve
cache = Path(sys.argv[1])
needles = required_texts(resolve())
files = [f for f in discover([Path('.')], Path('.'), [], True).files
         if any(n in f.read_text(errors='replace') for n in needles)]
start = time.perf_counter()
found = [for_file(f, cache) for f in files]
digests = [imp.digest() for imp in found if imp is not None]
elapsed = time.perf_counter() - start
index = next(imp.index for imp in found if imp is not None)
parsed = sum(1 for entry in index.entries.values() if entry[2] is not None)
print(json.dumps({"seconds": elapsed, "candidates": len(files), "modules": parsed}))
"""


def _run(code: str, repo: Path, env: dict[str, str], *args: str) -> tuple[float, str]:
    """CPU seconds (user + system) of the command and its worker processes, and its output: on a
    shared machine CPU time is steadier than wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def measure(repo: Path, rounds: int = 3) -> dict[str, object]:
    off, cold, warm = [], [], []
    facts: dict[str, object] = {}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as off_cache, tempfile.TemporaryDirectory() as cache:
            off.append(_run(_OFF, repo, {**os.environ, "LOOPCHECK_CACHE_DIR": off_cache})[0])
            env = {**os.environ, "LOOPCHECK_CACHE_DIR": cache}
            cold.append(_run(_ON, repo, env)[0])
            facts = json.loads(_run(_FACTS, repo, env, str(Path(cache) / "project"))[1])
            warm.append(float(facts["seconds"]))  # type: ignore[arg-type]
    files = sum(1 for _ in repo.rglob("*.py"))
    return {"repo": repo.name, "python files": files, "candidates": facts["candidates"],
            "modules read": facts["modules"], "off s": statistics.median(off), "cold s": statistics.median(cold),
            "facts warm s": statistics.median(warm)}


def main(argv: list[str]) -> int:
    rows = [measure(Path(a).resolve()) for a in argv]
    print("| repository | .py files | candidate files | modules read | check without facts | cold check with facts "
          "| facts, warm |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['repo']} | {r['python files']} | {r['candidates']} | {r['modules read']} | {r['off s']:.2f} s "
              f"| {r['cold s']:.2f} s | {r['facts warm s']:.3f} s |")
    print("\nCPU seconds; facts, warm: wall seconds inside the process.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
