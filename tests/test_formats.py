"""`--output-format sarif|github|junit` and `--output-file`: what CI systems read."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from loopcheck.catalog import CODES
from loopcheck.findings import Finding
from loopcheck.formats import RULE_DOCS_URL, github, sarif
from tests.conftest import BUGGY, CLEAN
from tests.projects import write_project

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"  # OASIS SARIF 2.1.0 (errata 01), see its NOTICE
WARNING_EXAMPLE = textwrap.dedent("""\
    for epoch in range(epochs):
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        scheduler.step()
        optimizer.step()
""")  # LC302 scheduler-before-optimizer, a warning


def _validate(document: dict) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(document)


def _apply(source: str, replacements: list[dict]) -> str:
    for change in sorted(replacements, key=lambda c: -c["deletedRegion"]["charOffset"]):
        start = change["deletedRegion"]["charOffset"]
        end = start + change["deletedRegion"]["charLength"]
        source = source[:start] + change.get("insertedContent", {}).get("text", "") + source[end:]
    return source


def test_sarif_is_valid_and_complete(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "sched.py").write_text(WARNING_EXAMPLE)
    (project / "broken.py").write_text("for x in loader\n    loss.backward()\n")
    code, out, _ = run_cli("check", "--output-format", "sarif")
    assert code == 1
    document = json.loads(out)
    _validate(document)
    assert document["version"] == "2.1.0"
    (run,) = document["runs"]
    rules = run["tool"]["driver"]["rules"]
    by_id = {rule["id"]: rule for rule in rules}
    assert set(CODES) <= set(by_id)
    lc101 = by_id["LC101"]
    assert lc101["name"] == "zero-grad-in-accumulation"
    assert lc101["helpUri"] == f"{RULE_DOCS_URL}LC101-zero-grad-in-accumulation.md"
    assert "## Why is this bad?" in lc101["help"]["text"] and lc101["help"]["markdown"].startswith("# LC101")
    assert lc101["fullDescription"]["text"].startswith("Gradients are zeroed on every micro-batch")
    assert lc101["defaultConfiguration"]["level"] == "error"
    assert by_id["LC302"]["defaultConfiguration"]["level"] == "warning"
    for rule in rules:  # every helpUri names a page that exists in the repository
        if rule["id"] in CODES:
            assert (ROOT / "rules" / rule["helpUri"].removeprefix(RULE_DOCS_URL)).is_file(), rule["helpUri"]
    results = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r for r in run["results"]}
    assert set(results) == {"train.py", "sched.py", "broken.py"}
    result = results["train.py"]
    assert result["ruleId"] == "LC101" and rules[result["ruleIndex"]]["id"] == "LC101"
    assert result["level"] == "error" and results["sched.py"]["level"] == "warning"
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 26, "snippet": {"text": "    optimizer.zero_grad()"}}
    assert result["message"]["text"].startswith("`optimizer` gradients are zeroed")
    assert len(result["partialFingerprints"]["loopcheck/v1"]) == 16
    assert results["broken.py"]["ruleId"] == "LC000"


def test_sarif_fixes_are_the_fix_as_replacements(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    document = json.loads(run_cli("check", "--output-format", "sarif")[1])
    (fix,) = document["runs"][0]["results"][0]["fixes"]
    assert fix["description"]["text"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "train.py"
    assert run_cli("check", "--fix")[0] == 0
    assert _apply(BUGGY, change["replacements"]) == (project / "train.py").read_text()


def test_sarif_replacements_of_an_insertion_and_a_deletion() -> None:
    before = "a\nb\nc\n"
    assert _apply(before, sarif.replacements(before, "a\nc\nb\n")) == "a\nc\nb\n"
    assert _apply(before, sarif.replacements(before, "x\na\nb\nc\n")) == "x\na\nb\nc\n"
    assert _apply(before, sarif.replacements(before, "a\nb\n")) == "a\nb\n"


def test_sarif_without_findings_is_valid(project: Path, run_cli) -> None:
    (project / "train.py").write_text(CLEAN)
    code, out, _ = run_cli("check", "--output-format", "sarif")
    assert code == 0
    document = json.loads(out)
    _validate(document)
    assert document["runs"][0]["results"] == []


def test_github_annotations(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "sched.py").write_text(WARNING_EXAMPLE)
    code, out, _ = run_cli("check", "--output-format", "github")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::warning file=sched.py,line=4,col=5,endLine=4,endColumn=21,"
                               "title=LC302 scheduler-before-optimizer::")
    assert lines[1].startswith("::error file=train.py,line=2,col=5,endLine=2,endColumn=26,"
                               "title=LC101 zero-grad-in-accumulation::`optimizer` gradients are zeroed")


def test_github_levels_and_escaping() -> None:
    finding = Finding(filename="a,b:c.py", line=3, col=1, code="LC603", name="batch-size-advice",
                      message="50% of memory\nfree", severity="info", end_line=3, end_col=4)
    assert github.annotation(finding) == ("::notice file=a%2Cb%3Ac.py,line=3,col=1,endLine=3,endColumn=4,"
                                          "title=LC603 batch-size-advice::50%25 of memory%0Afree")


def test_junit_lists_findings_as_failures_and_clean_files_as_passes(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "clean.py").write_text(CLEAN)
    code, out, _ = run_cli("check", "--output-format", "junit")
    assert code == 1
    root = ET.fromstring(out.encode())
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    cases = {case.get("classname"): case for case in suite.findall("testcase")}
    failure = cases["train.py"].find("failure")
    assert failure is not None and failure.get("type") == "LC101"
    assert failure.text.startswith("train.py:2:5: LC101 ")
    assert cases["clean.py"].find("failure") is None


def test_output_file_gets_the_report(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "reports").mkdir()
    code, out, _ = run_cli("check", "--output-format", "json", "--output-file", "reports/loopcheck.json")
    assert (code, out) == (1, "")
    assert json.loads((project / "reports" / "loopcheck.json").read_text())[0]["code"] == "LC101"
    code, out, _ = run_cli("check", "-o", "reports/out.txt")
    assert (code, out) == (1, "")
    assert "Found 1 problem" in (project / "reports" / "out.txt").read_text()


def test_output_file_in_a_missing_directory_is_a_clear_error(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, err = run_cli("check", "--output-format", "sarif", "--output-file", "missing/loopcheck.sarif")
    assert (code, out) == (2, "")
    assert err == "loopcheck: error: --output-file missing/loopcheck.sarif: directory missing does not exist\n"
    assert not (project / "missing").exists()


def test_sarif_for_files_outside_the_working_directory(tmp_path: Path, project: Path, run_cli) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "train.py").write_text(BUGGY)
    document = json.loads(run_cli("check", "--output-format", "sarif", str(outside))[1])
    _validate(document)
    location = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": (outside / "train.py").as_uri()}


def test_sarif_carries_the_file_level_codes(project: Path, run_cli) -> None:
    (project / "typo.py").write_text("x = 1  # noqa: LC10l\n")
    (project / "broken.py").write_text("for x in loader\n    loss.backward()\n")
    # CPython's compiler gives up on a chain this long: not analysed
    (project / "chain.py").write_text("for x in loader:\n    model(x).backward()\ny = a" + ".m()" * 3000 + "\n")
    code, out, _ = run_cli("check", "--output-format", "sarif")
    document = json.loads(out)
    _validate(document)
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    assert [rules[r["ruleIndex"]]["id"] for r in document["runs"][0]["results"]] == ["LC000", "LC001", "LC002"]
    assert code == 1


def test_sarif_fixes_of_a_finding_that_rests_on_another_module(project: Path, run_cli) -> None:
    # the step is in an imported helper: the fix is found only with the project's facts, as the check reads them
    write_project(project, {
        "helpers.py": """
            import torch


            def train_one_epoch(model, loader, optimizer):
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
        """,
        "train.py": """
            import torch
            from helpers import train_one_epoch


            def fit(model, loader, epochs=90):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
                for epoch in range(epochs):
                    scheduler.step()
                    train_one_epoch(model, loader, optimizer)
        """})
    before = (project / "train.py").read_text()
    document = json.loads(run_cli("check", "--output-format", "sarif", "train.py")[1])
    (result,) = document["runs"][0]["results"]
    assert result["ruleId"] == "LC302"
    (change,) = result["fixes"][0]["artifactChanges"]
    assert run_cli("check", "--fix", "train.py")[0] == 0
    assert _apply(before, change["replacements"]) == (project / "train.py").read_text() != before
