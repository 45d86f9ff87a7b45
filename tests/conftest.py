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


def _shared_work(item: pytest.Item) -> str | None:
    """Which of the tests' own module- or session-scoped fixtures (a batch of scripts run once and
    shared by many tests) the test uses: the test package that defines it (``report``, ``runtime``,
    ``frameworks``), or the module for a top-level test module."""
    info = getattr(item, "_fixtureinfo", None)
    groups = set()
    for name in item.fixturenames:
        definitions = info.name2fixturedefs.get(name) if info is not None else None
        if not definitions or definitions[-1].scope not in ("session", "module"):
            continue
        module = getattr(definitions[-1].func, "__module__", "")
        parts = module.split(".")
        if parts[0] == "tests" and len(parts) > 1:
            groups.add(parts[1] if len(parts) > 2 else module)
    return min(groups) if groups else None


def pytest_itemcollected(item: pytest.Item) -> None:
    """Under pytest-xdist (`-n auto --dist loadgroup`) the tests that share one expensive batch run on
    one worker, so the batch runs once; the other tests are spread over the workers one by one. (Marked
    as each test is collected: xdist reads the marks in its own pytest_collection_modifyitems.)"""
    group = _shared_work(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


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
