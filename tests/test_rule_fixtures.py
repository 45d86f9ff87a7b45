"""Whole-file fixtures per static rule: ``rules/fixtures/<CODE>/*.py``.

Each fixture is a complete, realistic training script (a `# options: NAME` line sets an opt-in setting of
``loopcheck.config.Options`` it is checked with). A line that loopcheck must flag ends with a
trailing ``# LCxxx`` marker (``# LC105 LC106`` where two rules flag it); every other line must
produce no finding of any default rule (or of the rule the fixture's folder is named after, which
also runs when it is opt-in). A file without markers is a correct near-miss and must produce no
finding at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopcheck.config import Options
from loopcheck.engine import check_text
from loopcheck.selection import resolve

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "rules" / "fixtures"
MARKER = re.compile(r"#\s*(LC\d{3}(?:[ ,]+LC\d{3})*)\s*$")
# `# options: graphs_after_backward` in a fixture's first lines: the setting it is checked with
OPTIONS = re.compile(r"^# options: ([\w ,]+)$", re.MULTILINE)

STATIC_CODES = ("LC101", "LC102", "LC103", "LC104", "LC105", "LC106", "LC107", "LC108", "LC109", "LC111",
                "LC113", "LC301", "LC302", "LC303", "LC401", "LC402")

# Fixtures where loopcheck currently disagrees with the markers (fixture path relative to
# rules/fixtures -> why). Each is a known loopcheck bug to fix, not a wrong fixture.
KNOWN_DISCREPANCIES: dict[str, str] = {}

FILES = sorted(FIXTURES.glob("*/*.py"))


def expected(source: str) -> set[tuple[int, str]]:
    return {(n, code) for n, line in enumerate(source.splitlines(), 1) if (m := MARKER.search(line))
            for code in re.split(r"[ ,]+", m.group(1))}


def _param(path: Path) -> object:
    rel = path.relative_to(FIXTURES).as_posix()
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_DISCREPANCIES[rel])] if rel in KNOWN_DISCREPANCIES else []
    return pytest.param(path, id=rel, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in FILES])
def test_fixture(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    compile(source, str(path), "exec")  # a fixture must be valid Python
    found = OPTIONS.search(source)
    options = Options(**{name: True for name in re.split(r"[ ,]+", found.group(1).strip())}) if found else Options()
    findings = check_text(source, str(path), resolve(extend_select=[path.parent.name]), options)
    got = {(f.line, f.code) for f in findings}
    want = expected(source)
    lines = source.splitlines()

    def show(pairs: set[tuple[int, str]]) -> str:
        return "\n".join(f"    {line:>3}: {code}  | {lines[line - 1].strip() if 0 < line <= len(lines) else ''}"
                         for line, code in sorted(pairs)) or "    (none)"

    assert got == want, (f"{path.relative_to(ROOT)}\n  missed (marked, not flagged):\n{show(want - got)}\n"
                         f"  unexpected (flagged, not marked):\n{show(got - want)}")


def test_fixture_known_discrepancies_exist() -> None:
    for rel in KNOWN_DISCREPANCIES:
        assert (FIXTURES / rel).is_file(), f"KNOWN_DISCREPANCIES names a missing fixture: {rel}"


@pytest.mark.parametrize("code", STATIC_CODES)
def test_every_static_rule_has_buggy_and_correct_fixtures(code: str) -> None:
    files = sorted((FIXTURES / code).glob("*.py"))
    marked = [f for f in files if expected(f.read_text(encoding="utf-8"))]
    unmarked = [f for f in files if not expected(f.read_text(encoding="utf-8"))]
    assert marked, f"rules/fixtures/{code}/ has no fixture with a `# {code}` marker"
    assert any(code in {c for _, c in expected(f.read_text(encoding='utf-8'))} for f in marked), \
        f"no fixture in rules/fixtures/{code}/ marks {code} itself"
    assert unmarked, f"rules/fixtures/{code}/ has no correct (unmarked) near-miss fixture"
