"""The README's GitHub Actions workflow: valid YAML, and its `loopcheck` commands work as written.

The workflow block is read from README.md; its `loopcheck` steps run in a temporary project with
a known training-loop bug (after the baseline step the README tells users to take once), and
the SARIF file the upload step names must exist and be SARIF 2.1.0. The pre-commit step is the
hook that `tests/test_precommit.py` runs end to end.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BUGGY

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]


def _workflow() -> dict:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if "upload-sarif" in b]
    return yaml.safe_load(block)


def _loopcheck(project: Path, command: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "loopcheck"
    return subprocess.run([sys.executable, "-m", "loopcheck", *argv[1:]], cwd=project, capture_output=True,
                          text=True, timeout=300, check=False)


def test_install_step_is_the_pre_commit_hook_commit() -> None:
    from tests.test_precommit import readme_snippet

    (job,) = _workflow()["jobs"].values()
    (install,) = [s["run"] for s in job["steps"] if s.get("run", "").startswith("pip install")]
    (hook,) = readme_snippet()["repos"]
    # no release on PyPI yet: `pip install loopcheck` would find nothing (or someone else's package)
    requirement = shlex.split(install)[2]
    assert requirement == f"loopcheck @ git+{hook['repo']}@{hook['rev']}"
    assert "pre-commit" in shlex.split(install)


def test_workflow_shape() -> None:
    (job,) = _workflow()["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    runs = [step.get("run", "") for step in job["steps"]]
    assert any(r.startswith("pre-commit run") for r in runs)


def test_workflow_loopcheck_commands_work(tmp_path: Path) -> None:
    (job,) = _workflow()["jobs"].values()
    project = tmp_path / "training-repo"
    project.mkdir()
    (project / "train.py").write_text(BUGGY)
    assert _loopcheck(project, "loopcheck check --write-baseline loopcheck-baseline.json").returncode == 0

    steps = [s for s in job["steps"] if s.get("run", "").startswith("loopcheck ")]
    assert len(steps) == 2
    for step in steps:
        done = _loopcheck(project, step["run"])
        assert done.returncode == 0, (step["run"], done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
    (upload,) = [s for s in job["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    sarif = json.loads((project / upload["with"]["sarif_file"]).read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"][0]["ruleId"] == "LC101"

    # a new problem fails the gate step with an annotation
    (project / "new.py").write_text(BUGGY)
    gate = _loopcheck(project, steps[-1]["run"])
    assert gate.returncode == 1
    assert gate.stdout.startswith("::error file=new.py,line=2,col=5,")
