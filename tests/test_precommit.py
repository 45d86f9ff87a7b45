"""End to end: a training repository uses this checkout as a pre-commit hook repository.

A commit that adds a training-loop bug is refused with the finding; the fixed file commits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import BUGGY, CLEAN

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, timeout=600)


def test_precommit_refuses_a_buggy_commit_and_accepts_a_clean_one(tmp_path: Path) -> None:
    rev = _git(ROOT, "rev-parse", "HEAD").stdout.strip()
    repo = tmp_path / "training-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "config", "user.name", "dev")
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {rev}\n    hooks:\n      - id: loopcheck\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PRE_COMMIT_COLOR": "never"}
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env, check=True,
                   capture_output=True, timeout=120)

    (repo / "train.py").write_text(BUGGY)
    _git(repo, "add", ".")
    refused = subprocess.run(["git", "commit", "-m", "accumulate"], cwd=repo, env=env, capture_output=True,
                             text=True, timeout=900)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output
    assert "train.py:2:5: LC101" in output
    assert _git(repo, "rev-list", "--all", check=False).stdout.strip() == ""  # nothing was committed

    (repo / "train.py").write_text(CLEAN)
    _git(repo, "add", ".")
    accepted = subprocess.run(["git", "commit", "-m", "fixed"], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=900)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "loopcheck" in accepted.stdout + accepted.stderr and "Passed" in accepted.stdout + accepted.stderr
