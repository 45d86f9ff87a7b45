"""Every VALID and INVALID example of every rule, run as a test.

An INVALID example marks each line that must be flagged with a trailing ``# LCxxx`` comment;
the rule must flag exactly those lines, at a column inside the line, and nothing else.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.rules import RULES

_MARK = re.compile(r"#\s*(LC\d{3})\s*$")


def _cases(kind: str) -> list[tuple[str, int, str]]:
    return [(code, i, textwrap.dedent(example)) for code, rule in RULES.items()
            for i, example in enumerate(getattr(rule, kind))]


def _ids(cases: list[tuple[str, int, str]]) -> list[str]:
    return [f"{code}-{i}" for code, i, _ in cases]


VALID = _cases("VALID")
INVALID = _cases("INVALID")


def test_every_rule_has_examples() -> None:
    for code, rule in RULES.items():
        assert rule.VALID and rule.INVALID, f"{code} needs valid and invalid examples"


@pytest.mark.parametrize(("code", "index", "example"), VALID, ids=_ids(VALID))
def test_valid_example_is_not_flagged(code: str, index: int, example: str) -> None:
    findings = check_text(example, "example.py", frozenset({code}), RULES[code].EXAMPLE_OPTIONS)
    assert findings == [], [f"{f.line}:{f.col} {f.message}" for f in findings]


@pytest.mark.parametrize(("code", "index", "example"), INVALID, ids=_ids(INVALID))
def test_invalid_example_is_flagged_on_marked_lines(code: str, index: int, example: str) -> None:
    lines = example.splitlines()
    expected = {n for n, line in enumerate(lines, 1) if (m := _MARK.search(line)) and m.group(1) == code}
    assert expected, "an invalid example must mark the flagged line with '# LCxxx'"
    findings = check_text(example, "example.py", frozenset({code}), RULES[code].EXAMPLE_OPTIONS)
    assert {f.line for f in findings} == expected, [f"{f.line}:{f.col} {f.message}" for f in findings]
    for finding in findings:
        assert finding.code == code
        assert 1 <= finding.col <= len(lines[finding.line - 1])
        assert not lines[finding.line - 1][: finding.col - 1].strip().startswith("#")
