"""`--write-baseline` / `--baseline`: gate only new findings, robust to moved code and bad files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import BUGGY

SECOND_LOOP = textwrap.dedent("""\
    for j, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (j + 1) % accum == 0 or (j + 1) == len(loader):
            optimizer.step()
""")  # the same bug as BUGGY again, in a second loop of the same file


def test_write_baseline_records_findings_and_exits_zero(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, err = run_cli("check", "--write-baseline", "loopcheck-baseline.json")
    assert (code, out) == (0, "")
    assert err == "Wrote 1 finding to baseline loopcheck-baseline.json.\n"
    data = json.loads((project / "loopcheck-baseline.json").read_text())
    (entry,) = data["findings"]
    assert entry["code"] == "LC101" and entry["file"] == "train.py" and entry["count"] == 1
    assert len(entry["fingerprint"]) == 16


def test_baseline_hides_known_findings_even_when_lines_move(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    run_cli("check", "--write-baseline", "loopcheck-baseline.json")
    assert run_cli("check", "--baseline", "loopcheck-baseline.json")[:3] == (
        0, "All checks passed! (1 file checked)\n", "1 finding hidden by baseline loopcheck-baseline.json.\n")
    (project / "train.py").write_text("import torch\n\n\n# a comment\n" + BUGGY)  # moved 4 lines down
    assert run_cli("check", "--baseline", "loopcheck-baseline.json")[0] == 0


def test_baseline_counts_copies_and_reports_new_findings(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    run_cli("check", "--write-baseline", "loopcheck-baseline.json")
    (project / "train.py").write_text(SECOND_LOOP + BUGGY)  # the same problem twice: one is new
    code, out, _ = run_cli("check", "--baseline", "loopcheck-baseline.json", "--output-format", "json")
    assert code == 1
    assert [(f["code"], f["location"]["row"]) for f in json.loads(out)] == [("LC101", 8)]
    (project / "other.py").write_text(BUGGY)  # a known problem in another file is new there
    code, out, _ = run_cli("check", "--baseline", "loopcheck-baseline.json", "--output-format", "json")
    assert sorted(f["filename"] for f in json.loads(out)) == ["other.py", "train.py"]


def test_baseline_paths_are_relative_to_the_baseline_file(project: Path, run_cli, monkeypatch) -> None:
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(BUGGY)
    run_cli("check", "--write-baseline", "loopcheck-baseline.json")
    assert json.loads((project / "loopcheck-baseline.json").read_text())["findings"][0]["file"] == "src/train.py"
    monkeypatch.chdir(project / "src")
    assert run_cli("check", "--baseline", "../loopcheck-baseline.json")[0] == 0


@pytest.mark.parametrize("content, message", [
    ("{not json", "baseline bad.json is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
    ("[1, 2]", "baseline bad.json is not a loopcheck baseline (write one with --write-baseline)"),
    ('{"version": 2, "results": []}', "baseline bad.json is not a loopcheck baseline (write one with --write-baseline)"),
    ('{"loopcheck-baseline": 99, "findings": []}',
     "baseline bad.json has format version 99; this loopcheck reads version 1 (write it again with --write-baseline)"),
    ('{"loopcheck-baseline": 1, "findings": {}}', "baseline bad.json: 'findings' must be a list"),
    ('{"loopcheck-baseline": 1, "findings": [{"code": "LC101", "file": 3}]}',
     "baseline bad.json: entry 0 must have string code, file and fingerprint and a positive count"),
    (b"\xff\xfe\x00", None),
    ("[" * 100_000 + "]" * 100_000, "baseline bad.json is not a loopcheck baseline (nested too deeply)"),
])
def test_corrupt_or_foreign_baseline_is_a_one_line_error(project: Path, run_cli, content, message) -> None:
    (project / "train.py").write_text(BUGGY)
    path = project / "bad.json"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    code, out, err = run_cli("check", "--baseline", "bad.json")
    assert (code, out) == (2, "")
    assert err.startswith("loopcheck: error: ") and err.count("\n") == 1, err
    if message:
        assert err == f"loopcheck: error: {message}\n"


def test_missing_baseline_and_missing_directory(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check", "--baseline", "none.json")[::2] == (
        2, "loopcheck: error: baseline none.json does not exist (create it with --write-baseline)\n")
    assert run_cli("check", "--write-baseline", "no/dir/b.json")[::2] == (
        2, "loopcheck: error: --write-baseline no/dir/b.json: directory no/dir does not exist\n")


def test_broken_baseline_leaves_the_output_file_alone(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "bad.json").write_text("[]")
    (project / "report.sarif").write_text("previous")
    assert run_cli("check", "--baseline", "bad.json", "-o", "report.sarif")[0] == 2
    assert (project / "report.sarif").read_text() == "previous"


def test_a_baseline_path_that_is_a_directory_is_a_clear_error(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "base").mkdir()
    assert run_cli("check", "--write-baseline", "base")[::2] == (
        2, "loopcheck: error: cannot write baseline base: Is a directory\n")
    assert sorted(p.name for p in project.iterdir()) == ["base", "train.py"]  # no temporary file left
    assert run_cli("check", "--baseline", "base")[::2] == (2, "loopcheck: error: cannot read baseline base: Is a directory\n")
