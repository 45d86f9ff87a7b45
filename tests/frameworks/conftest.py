"""Runs every framework scenario once per test session, two processes at a time: under
``loopcheck run`` (``*_watch.py`` under plain python), the ``*_ok.py`` ones also under plain python
(to compare output and exit code), and those with ``distributed-expect`` under torchrun on 2 CPU
ranks. Each runs in its own temporary working directory, offline."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from .scenarios import REQUIRES, ROOT, Scenario, all_scenarios


@dataclass
class Run:
    report: dict
    exit_code: int
    stdout: str
    stderr: str


def missing_modules(scenario: Scenario) -> list[str]:
    return [m for m in REQUIRES.get(scenario.framework, ()) if importlib.util.find_spec(m) is None]


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""),
                OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1",
                TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def _run(argv: list[str], cwd: Path, report: Path) -> Run:
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600,
                              start_new_session=True)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, str(exc.stdout or ""), f"timed out: {argv}\n{exc.stderr or ''}"
    return Run(json.loads(report.read_text()) if report.exists() else {}, code, out, err)


def _jobs(scenarios: list[Scenario], tmp: Path) -> dict[tuple[str, str], tuple[list[str], Path, Path]]:
    run = [sys.executable, "-m", "loopcheck", "run"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                "-m", "loopcheck", "run"]
    jobs = {}
    for s in scenarios:
        if missing_modules(s):
            continue
        report = tmp / f"{s.name}.json"
        script = str(s.path)
        if s.watch:
            jobs[(s.name, "watch")] = ([sys.executable, script, str(report)], tmp / s.name, report)
        else:
            jobs[(s.name, "run")] = ([*run, "--report", str(report), script], tmp / s.name, report)
        if s.name.endswith("_ok"):
            jobs[(s.name, "python")] = ([sys.executable, script], tmp / f"{s.name}-python", tmp / "none")
        if s.distributed:
            report = tmp / f"{s.name}-2proc.json"
            jobs[(s.name, "2proc")] = ([*torchrun, "--report", str(report), script], tmp / f"{s.name}-2proc", report)
    return jobs


@pytest.fixture(scope="session")
def framework_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Run]:
    tmp = tmp_path_factory.mktemp("frameworks")
    jobs = _jobs(all_scenarios(), tmp)
    # the torchrun jobs (2 processes each) first, so they do not run side by side at the end
    order = sorted(jobs, key=lambda key: key[1] != "2proc")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(_run, *jobs[key]) for key in order}
    return {key: future.result() for key, future in futures.items()}
