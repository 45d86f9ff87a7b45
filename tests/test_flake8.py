"""The flake8 plugin: LC codes through flake8, at the positions `loopcheck check` reports."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from loopcheck.flake8_plugin import Plugin
from tests.conftest import BUGGY, CLEAN
from tests.projects import write_project
from tests.test_project_own_optimizer_steps import ARCHITECT, SEARCH

pytest.importorskip("flake8")

OPT_IN = textwrap.dedent("""\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / 64
        loss.backward()
        if (i + 1) % 64 == 0:
            optimizer.step()
            optimizer.zero_grad()
""")  # LC110 excessive-accumulation, opt-in


def _flake8(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "LC", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def _plugin(source: str) -> list[tuple[int, int, str]]:
    lines = source.splitlines(keepends=True)
    return [(line, col, text) for line, col, text, _ in Plugin(ast.parse(source), lines, "train.py").run()]


def test_the_plugin_is_registered_for_the_lc_prefix() -> None:
    (entry,) = [e for e in entry_points(group="flake8.extension") if e.value.startswith("loopcheck.")]
    assert (entry.name, entry.value) == ("LC", "loopcheck.flake8_plugin:Plugin")


def test_flake8_reports_what_loopcheck_reports(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "clean.py").write_text(CLEAN)
    done = _flake8(project, ".")
    assert done.returncode == 1, done.stderr
    loopcheck_line = run_cli("check", "--no-show-source", "-q")[1].splitlines()[0]
    assert done.stdout.splitlines() == [f"./{loopcheck_line.replace(' [*]', '')}"]
    assert done.stdout.startswith("./train.py:2:5: LC101 `optimizer` gradients are zeroed")


def test_columns_are_zero_based_for_flake8() -> None:
    ((line, col, text),) = _plugin(BUGGY)
    assert (line, col) == (2, 4) and text.startswith("LC101 ")


def test_noqa_and_flake8_ignore_apply(project: Path) -> None:
    (project / "train.py").write_text(BUGGY.replace("optimizer.zero_grad()", "optimizer.zero_grad()  # noqa: LC101"))
    assert _flake8(project, "train.py").stdout == ""
    (project / "train.py").write_text(BUGGY)
    assert _flake8(project, "--extend-ignore", "LC101", "train.py").stdout == ""


def test_opt_in_rules_need_loopcheck_extend_select(project: Path) -> None:
    (project / "train.py").write_text(OPT_IN)
    assert "LC110" not in _flake8(project, "train.py").stdout
    assert "LC110" in _flake8(project, "--loopcheck-extend-select", "LC110", "train.py").stdout
    bad = _flake8(project, "--loopcheck-extend-select", "LC999", "train.py")
    assert bad.returncode != 0 and "unknown rule selector 'LC999'" in bad.stderr



def test_the_plugin_reads_the_modules_the_file_imports(project: Path) -> None:
    # a zeroing inside a method of another module that clears the optimizer it was handed
    architect = ARCHITECT.replace("OPTIMIZER_PARAM", "optimizer").replace("OPTIMIZER", "optimizer")
    write_project(project, {"architect.py": architect, "search.py": SEARCH})
    search = (project / "search.py").read_text()
    found = [text for _, _, text, _ in Plugin(ast.parse(search), search.splitlines(keepends=True),
                                               str(project / "search.py")).run()]
    assert len(found) == 1 and found[0].startswith("LC101 ") and "architect.py:10" in found[0], found
