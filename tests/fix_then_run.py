"""Fix, then run: every runnable script with a safe static fix is copied, fixed with
``loopcheck check --fix``, and run under ``loopcheck run`` beside its unfixed original.

The scripts are the CPU scenarios of ``runtime/`` and the real-code shapes under
``tests/fixtures/fix_then_run/``. A fix is verified when the fixed script exits 0, the runtime checker
reports none of the fixed codes, and it reports nothing the original did not.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from loopcheck.engine import analyse, read_source
from loopcheck.selection import resolve

from .runtime.scenarios import ROOT, Scenario, all_scenarios, load, run_batch

FIXTURES = ROOT / "tests" / "fixtures" / "fix_then_run"


@dataclass
class Case:
    name: str
    original: Scenario
    fixed: Scenario
    fixable: list[str]  # codes of the safe fixes found before fixing, one per finding
    fixed_codes: set[str] = field(default_factory=set)  # codes whose fixable findings went away
    applied: int = 0
    diff: str = ""


@dataclass
class Run:
    exit_code: int
    codes: set[str]
    stderr: str


def cases() -> list[Scenario]:
    return all_scenarios() + [load(p) for p in sorted(FIXTURES.glob("*.py"))]


def _copy(scenario: Scenario, root: Path) -> Scenario:
    """The scenario copied under ``root`` (a project with its folder, so its config comes along)."""
    if scenario.project:
        folder = root / "projects" / scenario.path.parent.name
        shutil.copytree(scenario.path.parent, folder)
        return Scenario(folder / scenario.path.name, scenario.expected, scenario.args, scenario.exit_code)
    root.mkdir(parents=True, exist_ok=True)
    target = root / scenario.path.name
    shutil.copyfile(scenario.path, target)
    return Scenario(target, scenario.expected, scenario.args, scenario.exit_code)


def _safe_fixes(path: Path) -> list[tuple[str, int]]:
    source = read_source(path)
    _, results = analyse(source, str(path), resolve())
    return [(f.code, f.line) for f, fix in results if fix is not None and fix.safe]


def prepare(work: Path) -> list[Case]:
    """Copy every script with a safe fix twice, fix one copy with the CLI, and read what changed."""
    out = []
    for scenario in cases():
        fixable = _safe_fixes(scenario.path)
        if not fixable:
            continue
        original = _copy(scenario, work / "original")
        fixed = _copy(scenario, work / "fixed")
        out.append(Case(scenario.name, original, fixed, [code for code, _ in fixable]))
    subprocess.run([sys.executable, "-m", "loopcheck", "check", "--fix", "--no-cache", "--exit-zero", "--quiet",
                    str(work / "fixed")], cwd=work, check=True, capture_output=True)
    for case in out:
        left = [code for code, _ in _safe_fixes(case.fixed.path)]
        case.fixed_codes = {c for c in case.fixable if left.count(c) < case.fixable.count(c)}
        case.applied = len(case.fixable) - len(left)
        import difflib

        case.diff = "".join(difflib.unified_diff(case.original.path.read_text().splitlines(True),
                                                 case.fixed.path.read_text().splitlines(True)))
    return out


def run_all(cases: list[Case], work: Path) -> dict[tuple[str, str], Run]:
    """Both versions of every case under ``loopcheck run``, in two processes side by side."""
    batches = {"original": [c.original for c in cases], "fixed": [c.fixed for c in cases]}
    processes = {}
    for which, scenarios in batches.items():
        out = work / f"reports-{which}"
        out.mkdir()
        processes[which] = (run_batch(scenarios, out), out)
    runs = {}
    for which, (process, out) in processes.items():
        process.wait(timeout=300)
        for case in cases:
            name = case.original.name
            report = out / f"{name}.json"
            codes = {f["code"] for f in json.loads(report.read_text())["findings"]} if report.exists() else set()
            exit_file = out / f"{name}.exit"
            runs[(case.name, which)] = Run(int(exit_file.read_text()) if exit_file.exists() else -1, codes,
                                           (out / f"{name}.stderr").read_text() if (out / f"{name}.stderr").exists()
                                           else "")
    return runs


def problems(case: Case, runs: dict[tuple[str, str], Run]) -> list[str]:
    """Why the fixed script fails verification (empty: verified)."""
    before, after = runs[(case.name, "original")], runs[(case.name, "fixed")]
    out = []
    if after.exit_code != 0:
        out.append(f"the fixed script exits {after.exit_code}:\n{after.stderr[-2000:]}")
    if after.codes & case.fixed_codes:
        out.append(f"the runtime still reports the fixed {sorted(after.codes & case.fixed_codes)}")
    if after.codes - before.codes:
        out.append(f"the fixed script gets new runtime findings {sorted(after.codes - before.codes)}")
    return out
