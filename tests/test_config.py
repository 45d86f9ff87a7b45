"""`[tool.loopcheck]` in pyproject.toml: every key works, every mistake names the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import BUGGY


def _pyproject(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.loopcheck]\n" + body)


def test_ignore_and_select_from_config(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    _pyproject(project, 'ignore = ["zero-grad-in-accumulation"]\n')
    assert run_cli("check")[0] == 0
    _pyproject(project, 'select = ["LC3"]\n')
    assert run_cli("check")[0] == 0
    assert run_cli("check", "--select", "LC1")[0] == 1  # the command line wins


def test_extend_select_adds_to_the_default(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    _pyproject(project, 'extend-select = ["LC110"]\n')
    assert run_cli("check")[0] == 1


def test_per_file_ignores(project: Path, run_cli) -> None:
    (project / "scripts").mkdir()
    (project / "scripts" / "train.py").write_text(BUGGY)
    (project / "train.py").write_text(BUGGY)
    _pyproject(project, '[tool.loopcheck.per-file-ignores]\n"scripts/*.py" = ["LC101"]\n')
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines() if "LC101" in line] == ["train.py"]


def test_exclude_applies_to_walked_and_explicit_files(project: Path, run_cli) -> None:
    (project / "legacy").mkdir()
    (project / "legacy" / "train.py").write_text(BUGGY)
    _pyproject(project, 'extend-exclude = ["legacy/"]\n')
    assert run_cli("check")[0] == 0
    assert run_cli("check", "legacy/train.py")[0] == 0


def test_config_is_found_from_a_subdirectory(project: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(BUGGY)
    _pyproject(project, 'ignore = ["LC101"]\n')
    monkeypatch.chdir(project / "src")
    assert run_cli("check")[0] == 0


@pytest.mark.parametrize(("body", "message"), [
    ('selct = ["LC1"]\n', "unknown key 'selct' (did you mean 'select'?)"),
    ('exlude = ["x/"]\n', "unknown key 'exlude' (did you mean 'exclude'?)"),
    ('[tool.loopcheck.lr-scaling]\nreference-batchsize = 256\n',
     "lr-scaling: unknown key 'reference-batchsize' (did you mean 'reference-batch-size'?)"),
    ('select = ["LC10l"]\n', "unknown rule selector 'LC10l' (did you mean 'LC101'?)"),
    ('ignore = ["zero-grad-in-acumulation"]\n', "(did you mean 'zero-grad-in-accumulation'?)"),
    ('extend_select = ["LC1"]\n', "unknown key 'extend_select' (did you mean 'extend-select'?)"),
    ('select = "LC101"\n', "[tool.loopcheck].select must be a list of strings"),
    ('ignore = ["LC9"]\n', "[tool.loopcheck].ignore: unknown rule selector 'LC9'"),
    ('respect-gitignore = "yes"\n', "respect-gitignore must be true or false"),
    ('per-file-ignores = ["x"]\n', "per-file-ignores must be a table"),
    ('[tool.loopcheck.per-file-ignores]\n"a.py" = ["nope"]\n', 'per-file-ignores."a.py": unknown rule selector'),
    ("select = [\n", "invalid TOML"),
])
def test_bad_config_names_the_key(project: Path, run_cli, body: str, message: str) -> None:
    (project / "train.py").write_text(BUGGY)
    _pyproject(project, body)
    code, out, err = run_cli("check")
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1  # one clear line


def test_explicit_config_file(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "ci.toml").write_text('[tool.loopcheck]\nignore = ["LC1"]\n')
    assert run_cli("check", "--config", "ci.toml")[0] == 0
    code, _, err = run_cli("check", "--config", "missing.toml")
    assert code == 2 and "missing.toml: no such configuration file" in err
