"""Reports of real runs for the report tests, made once per test session as users make them:
``loopcheck run --report R.json --html R.html SCRIPT``. The single-process runs share one
interpreter (``runner.py``: torch is imported once); a two-rank DDP run (gloo on the CPU) under
torchrun runs beside them.

- ``clean``: runtime/ok_accumulation.py (accumulation 4, scheduler, EMA; no finding)
- ``lc101``: runtime/lc101_zero_grad_in_window.py (4 backward passes per step, LC101; also
  ``--output-format sarif -o lc101.sarif``)
- ``leak``: scenarios/cpu_memory_growth.py (process memory grows every step; on the CPU the
  runtime samples RSS: LC602 itself is CUDA-only)
- ``ddp``: runtime/ddp_lc502_shifted_no_sync.py on 2 ranks (LC502, replicas diverge at step 0)
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SINGLE = {"clean": ROOT / "runtime" / "ok_accumulation.py",
          "lc101": ROOT / "runtime" / "lc101_zero_grad_in_window.py",
          "leak": HERE / "scenarios" / "cpu_memory_growth.py"}
DDP = ROOT / "runtime" / "ddp_lc502_shifted_no_sync.py"


@dataclass
class Run:
    json: Path
    html: Path
    report: dict[str, Any]
    exit_code: int
    stderr: str


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""), OMP_NUM_THREADS="1",
                PYTHONDONTWRITEBYTECODE="1", LOOPCHECK_NO_PROGRESS="1")


def torchrun_available() -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_gloo_available() and shutil.which("torchrun") is not None


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    out = tmp_path_factory.mktemp("report-runs")
    jobs = [[name, "run", "--report", str(out / f"{name}.json"), "--html", str(out / f"{name}.html"),
             *(["--output-format", "sarif", "-o", str(out / "lc101.sarif")] if name == "lc101" else []), str(script)]
            for name, script in SINGLE.items()]
    (out / "jobs.json").write_text(json.dumps(jobs))
    single = subprocess.Popen([sys.executable, "-m", "tests.report.runner", str(out)], cwd=ROOT, env=_env())
    ddp = None
    if torchrun_available():
        (out / "ddp").mkdir()
        with open(out / "ddp.stderr", "wb") as log:
            ddp = subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
                 "loopcheck", "run", "--report", str(out / "ddp" / "r.json"), "--html", str(out / "ddp.html"),
                 "--consistency-every", "1", str(DDP)],
                cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    single.wait(timeout=300)
    results = {}
    for name in SINGLE:
        results[name] = Run(out / f"{name}.json", out / f"{name}.html", json.loads((out / f"{name}.json").read_text()),
                            int((out / f"{name}.exit").read_text()), (out / f"{name}.stderr").read_text())
    if ddp is not None:
        try:
            code = ddp.wait(timeout=180)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(ddp.pid, signal.SIGKILL)
            code = ddp.wait()
        merged = out / "ddp" / "r.json"
        results["ddp"] = Run(merged, out / "ddp.html", json.loads(merged.read_text()) if merged.exists() else {},
                             code, (out / "ddp.stderr").read_text())
    return results


@pytest.fixture(scope="session")
def ddp_run(runs: dict[str, Run]) -> Run:
    if "ddp" not in runs:
        pytest.skip("needs torch.distributed with gloo and torchrun")
    run = runs["ddp"]
    assert run.report, run.stderr[-3000:]
    return run
