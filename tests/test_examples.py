"""The shipped example training scripts report exactly the codes their header declares.

Each file in ``examples/`` starts with ``# expected: LC101, LC301`` (or ``# expected: none``);
``check_source`` with the default rule selection must report exactly that set of codes.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.py"))

_HEADER = re.compile(r"#\s*expected:\s*(?P<codes>.*)$")
_CODE = re.compile(r"^LC\d{3}$")


def expected_codes(path: Path) -> set[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    match = _HEADER.match(lines[0]) if lines else None
    assert match, f"{path.name}: the first line must be '# expected: LC101, LC301' or '# expected: none'"
    raw = match.group("codes").strip()
    if raw.lower() == "none":
        return set()
    codes = {c.strip() for c in raw.split(",") if c.strip()}
    bad = sorted(c for c in codes if not _CODE.match(c))
    assert not bad, f"{path.name}: malformed codes in the expected header: {bad}"
    return codes


def test_examples_exist():
    assert EXAMPLES, "examples/ holds no Python files"


def test_examples_mix_correct_and_buggy():
    kinds = {bool(expected_codes(p)) for p in EXAMPLES}
    assert kinds == {True, False}, "examples/ should show both correct and buggy scripts"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_has_explanation(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 1 and lines[1].startswith("# ") and len(lines[1]) > 10, (
        f"{path.name}: the expected header must be followed by a comment explaining the code"
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_reports_expected_codes(path: Path):
    from loopcheck.engine import check_source

    expected = expected_codes(path)
    findings = check_source(path.read_text(encoding="utf-8"), filename=str(path))
    got = {f.code for f in findings}
    details = "\n".join(f"{f.code} {f.line}:{f.col} {f.message}" for f in findings) or "(no findings)"
    assert got == expected, (
        f"{path.name}: expected {sorted(expected) or 'none'}, got {sorted(got) or 'none'}\n{details}"
    )
