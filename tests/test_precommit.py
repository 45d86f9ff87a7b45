"""End to end: a training repository uses this checkout as a pre-commit hook repository.

The configuration is the README's snippet, with its repository URL replaced by this checkout's
path and its `rev` by this checkout's commit. A commit that adds a training-loop bug is refused
with the finding; the fixed file commits.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BUGGY, CLEAN

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, timeout=600)


def readme_snippet() -> dict:
    """The README's pre-commit configuration."""
    blocks = re.findall(r"### pre-commit\n\n```yaml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"),
                        re.DOTALL)
    assert len(blocks) == 1, "the README's pre-commit section has one yaml block"
    return yaml.safe_load(blocks[0])


def test_readme_snippet_names_a_commit_of_this_repository() -> None:
    (repo,) = readme_snippet()["repos"]
    assert repo["hooks"] == [{"id": "loopcheck"}]
    rev = str(repo["rev"])
    assert re.fullmatch(r"[0-9a-f]{40}", rev), "rev is a full commit SHA until there is a release tag"
    if _git(ROOT, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone does not hold the commit the README names")
    assert _git(ROOT, "cat-file", "-e", f"{rev}^{{commit}}", check=False).returncode == 0, f"{rev} is not a commit here"
    hooks = yaml.safe_load(_git(ROOT, "show", f"{rev}:.pre-commit-hooks.yaml").stdout)
    assert [hook["id"] for hook in hooks] == ["loopcheck"]


def test_precommit_refuses_a_buggy_commit_and_accepts_a_clean_one(tmp_path: Path) -> None:
    rev = _git(ROOT, "rev-parse", "HEAD").stdout.strip()
    repo = tmp_path / "training-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "config", "user.name", "dev")
    config = readme_snippet()
    config["repos"][0].update(repo=str(ROOT), rev=rev)  # this checkout, at its commit
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
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
