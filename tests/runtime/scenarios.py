"""The scenario scripts in ``runtime/`` and what each must produce.

``runtime/*.py`` run from the repository root; ``runtime/projects/NAME/train.py`` run in their
own folder, whose ``pyproject.toml`` configures loopcheck (LC304/LC305 need a reference).
``runtime/gpu_*.py`` need CUDA. A scenario marks every line a finding must point at with ``# expect: LCxxx`` (several codes
comma-separated); a scenario without markers must produce no finding. Extra options for
``loopcheck run`` go in its docstring as ``loopcheck-args: ...``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "runtime"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")
_ARGS = re.compile(r'loopcheck-args:\s*([^"\n]+)')
_EXIT = re.compile(r"loopcheck-exit:\s*(\d+)")


@dataclass(frozen=True)
class Scenario:
    path: Path
    expected: frozenset[tuple[str, int]]
    args: tuple[str, ...]
    exit_code: int

    @property
    def project(self) -> bool:
        return self.path.parent.parent.name == "projects"

    @property
    def name(self) -> str:
        return f"project_{self.path.parent.name}" if self.project else self.path.stem

    @property
    def cwd(self) -> Path:
        return self.path.parent if self.project else ROOT


def load(path: Path) -> Scenario:
    text = path.read_text()
    expected = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            expected |= {(code.strip(), number) for code in match.group(1).split(",") if code.strip()}
    args = _ARGS.search(text)
    exit_code = _EXIT.search(text)
    return Scenario(path, frozenset(expected), tuple(args.group(1).split()) if args else (),
                    int(exit_code.group(1)) if exit_code else 0)


def all_scenarios(gpu: bool = False) -> list[Scenario]:
    scripts = [p for p in sorted(SCENARIOS.glob("*.py")) if p.name.startswith("gpu_") == gpu
               and not p.name.startswith("ddp_")]  # ddp_* run under torchrun (test_distributed.py)
    if not gpu:
        scripts += sorted(SCENARIOS.glob("projects/*/train.py"))
    return [load(p) for p in scripts]


def run_batch(scenarios: list[Scenario], out_dir: Path) -> subprocess.Popen[bytes]:
    """Start one process that runs the scenarios one after the other through
    ``loopcheck.runtime.command.main`` (each with its own session and report)."""
    jobs = [[s.name, str(s.cwd), *s.args, "--report", str(out_dir / f"{s.name}.json"), str(s.path)]
            for s in scenarios]
    (out_dir / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen([sys.executable, "-m", "tests.runtime.batch_runner", str(out_dir)],
                            cwd=ROOT, env=env)


def findings_of(report: dict) -> set[tuple[str, int]]:
    return {(f["code"], f["line"]) for f in report["findings"]}
