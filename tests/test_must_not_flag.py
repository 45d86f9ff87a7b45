"""Correct training code that must not be flagged.

Every file in ``tests/fixtures/must_not_flag`` is correct code and must produce no finding, with
every rule selected (the opt-in ones too: a rule made opt-in must stay quiet on correct code). Each fixture starts with ``# must-not-flag: <bullet>`` naming the
bullet of the "Correct code that must not be flagged" list in ``rules/must-not-flag.md`` it covers
(verbatim, without markdown backticks), or ``# must-not-flag: extra: <what>`` for additional correct
code; a second test checks that every bullet of that list is covered by at least one fixture.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "must_not_flag"
CATALOGUE = REPO_ROOT / "rules" / "must-not-flag.md"

HEADER_PREFIX = "# must-not-flag: "
EXTRA_PREFIX = "extra: "
SECTION_TITLE = "## Correct code that must not be flagged"

FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))


def _header(path: Path) -> str:
    first_line = path.read_text(encoding="utf-8").splitlines()[0] if path.stat().st_size else ""
    assert first_line.startswith(HEADER_PREFIX), (
        f"{path.name}: the first line must be '{HEADER_PREFIX}<rules/must-not-flag.md bullet>', got {first_line!r}"
    )
    return first_line[len(HEADER_PREFIX):].strip()


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def must_not_flag_bullets(catalogue: Path) -> list[str]:
    """The bullets of the "Correct code that must not be flagged" section, without backticks;
    a bullet continued on indented lines is joined into one line."""
    bullets: list[str] = []
    in_section = False
    for line in catalogue.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_section = line.startswith(SECTION_TITLE)
            continue
        if not in_section:
            continue
        if line.startswith(("- ", "* ")):
            bullets.append(line[2:])
        elif bullets and line.startswith((" ", "\t")) and line.strip():
            bullets[-1] += " " + line.strip()
    return [_normalise(b) for b in bullets]


def test_fixture_folder_is_not_empty():
    assert FIXTURE_FILES, f"no fixtures found in {FIXTURES}"


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_has_header(path: Path):
    assert _header(path)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_correct_code_is_not_flagged(path: Path):
    from loopcheck.engine import check_source

    findings = check_source(path.read_text(encoding="utf-8"), filename=str(path), select=["ALL"])
    details = "\n".join(f"{f.code} {f.line}:{f.col} {f.message}" for f in findings)
    assert findings == [], f"{path.name} is correct code but got findings:\n{details}"


def test_every_must_not_flag_bullet_has_a_fixture():
    bullets = must_not_flag_bullets(CATALOGUE)
    assert bullets, f"no bullets found under {SECTION_TITLE!r} in {CATALOGUE}"
    headers = {_normalise(_header(p)) for p in FIXTURE_FILES}
    missing = [b for b in bullets if b not in headers]
    assert not missing, f"{CATALOGUE.name} bullets without a fixture:\n" + "\n".join(
        f"  - {b}" for b in missing
    )


def test_every_fixture_header_names_a_bullet_or_is_an_extra():
    bullets = set(must_not_flag_bullets(CATALOGUE))
    unknown = [
        f"{p.name}: {_header(p)}"
        for p in FIXTURE_FILES
        if not _header(p).startswith(EXTRA_PREFIX) and _normalise(_header(p)) not in bullets
    ]
    assert not unknown, (
        "fixture headers that match no must-not-flag bullet (stale after a catalogue edit? "
        f"use '{EXTRA_PREFIX}...' for additional cases):\n" + "\n".join(f"  {u}" for u in unknown)
    )
