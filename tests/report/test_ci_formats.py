"""Runtime findings through ``loopcheck check``'s writers: SARIF that validates against the 2.1.0
schema, GitHub annotations and JUnit at the user's lines, JSON in check's shape; ``report show``
with ``--output-format`` and ``--fail-on``. The reports come from real ``loopcheck run``s
(``conftest.runs``)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loopcheck.cli import main
from loopcheck.report.commands import ci_text

from .conftest import ROOT, Run

SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
LC101_LINE = next(n for n, line in enumerate((ROOT / "runtime" / "lc101_zero_grad_in_window.py").read_text()
                                            .splitlines(), 1) if "expect: LC101" in line)


def test_sarif_of_a_runtime_report_validates_and_points_at_the_line(runs: dict[str, Run]) -> None:
    document = json.loads(ci_text(runs["lc101"].report, "sarif"))
    result, = document["runs"][0]["results"]
    assert result["ruleId"] == "LC101" and result["level"] == "error"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "runtime/lc101_zero_grad_in_window.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == LC101_LINE and location["region"]["startColumn"] == 5
    assert location["region"]["snippet"]["text"].strip() == "optimizer.zero_grad()  # expect: LC101"
    assert "first at optimizer step 0" in result["message"]["text"]
    if not SCHEMA.exists():
        pytest.skip(f"{SCHEMA.relative_to(ROOT)} is not vendored yet")
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))


def test_github_annotations_and_junit_point_at_the_users_line(runs: dict[str, Run]) -> None:
    annotation = ci_text(runs["lc101"].report, "github").strip()
    assert annotation.startswith(f"::error file=runtime/lc101_zero_grad_in_window.py,line={LC101_LINE},col=5,")
    assert "title=LC101 zero-grad-in-accumulation::gradients are reset" in annotation
    suite = ET.fromstring(ci_text(runs["lc101"].report, "junit").split("\n", 1)[1])
    case, = suite.iter("testcase")
    assert case.get("file") == "runtime/lc101_zero_grad_in_window.py" and case.get("line") == str(LC101_LINE)
    assert ci_text(runs["clean"].report, "github") == ""
    rows = json.loads(ci_text(runs["lc101"].report, "json"))
    assert rows[0]["location"] == {"row": LC101_LINE, "column": 5} and rows[0]["code"] == "LC101"


def test_report_show_formats_and_fail_on(runs: dict[str, Run], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    report = str(runs["lc101"].json)
    sarif = tmp_path / "r.sarif"
    assert main(["report", "show", report, "--output-format", "sarif", "-o", str(sarif)]) == 0
    assert json.loads(sarif.read_text())["runs"][0]["results"][0]["ruleId"] == "LC101"
    assert main(["report", "show", report, "--output-format", "github", "--fail-on", "error"]) == 1
    assert capsys.readouterr().out.startswith("::error file=runtime/lc101_zero_grad_in_window.py")
    assert main(["report", "show", str(runs["clean"].json), "--fail-on", "info"]) == 0
    assert main(["report", "show", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_run_writes_sarif_of_its_findings(runs: dict[str, Run]) -> None:
    sarif = json.loads((runs["lc101"].json.parent / "lc101.sarif").read_text())
    assert sarif == json.loads(ci_text(runs["lc101"].report, "sarif"))


def test_watch_writes_the_html_page(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from loopcheck.runtime import watch

    page = tmp_path / "watch.html"
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(html=str(page), summary=False):
        for i in range(8):
            optimizer.zero_grad()  # noqa: LC101 - the pitfall the page must show
            model(torch.randn(2, 4)).sum().backward()  # noqa: LC102
            if i % 2 == 1:
                optimizer.step()
    text = page.read_text()
    assert 'data-code="LC101"' in text and 'data-x="2" data-y="4"' in text  # 4 steps of 2 backward passes
