"""The catalogue pages under rules/ are generated from the rules and must not be stale."""

from __future__ import annotations

from loopcheck.catalog import CODES, FILE_CODES
from loopcheck.catalogue_pages import PAGES, expected_pages
from loopcheck.rules import RULES


def test_every_code_has_an_up_to_date_page() -> None:
    expected = expected_pages()
    assert set(expected) == {f"{code}-{info.name}.md" for code, info in [*CODES.items(), *FILE_CODES.items()]}
    stale = [name for name, text in expected.items()
             if not (PAGES / name).exists() or (PAGES / name).read_text(encoding="utf-8") != text]
    assert stale == [], f"run `python -m loopcheck.catalogue_pages` to regenerate: {stale}"


def test_rule_docs_have_the_ruff_sections() -> None:
    for code, rule in RULES.items():
        doc = __import__(rule.__module__, fromlist=["_"]).__doc__ or ""
        for section in ("## What it does", "## Why is this bad?", "## Fix"):
            assert section in doc, f"{code} lacks {section}"
        assert rule.message and "\n" not in rule.message


def test_rule_names_come_from_the_catalogue() -> None:
    for code, rule in RULES.items():
        assert rule.name() == CODES[code].name
        assert rule.__module__.rsplit(".", 1)[-1] == CODES[code].name.replace("-", "_")
