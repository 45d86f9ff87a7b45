from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from loopcheck.cli import main

BUGGY = textwrap.dedent("""\
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
""")
CLEAN = textwrap.dedent("""\
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
""")


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `loopcheck ARGS` in-process: (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory that is the working directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own result cache (never the user's ~/.cache/loopcheck)."""
    monkeypatch.setenv("LOOPCHECK_CACHE_DIR", str(tmp_path_factory.mktemp("loopcheck-cache")))
