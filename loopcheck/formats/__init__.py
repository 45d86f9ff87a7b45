"""Machine-readable output formats beyond text and JSON: SARIF, GitHub annotations, JUnit XML.

Each module has one ``render(findings, ...) -> str``; ``loopcheck.output.render`` picks one by
name and imports only that module.
"""

from __future__ import annotations

# Where the rule pages live (``rules/<CODE>-<name>.md``); SARIF's helpUri points there.
REPOSITORY_URL = "https://github.com/loopcheck/loopcheck"
RULE_DOCS_URL = f"{REPOSITORY_URL}/blob/main/rules/"


def rule_url(code: str) -> str:
    """The rule's catalogue page, e.g. ``.../rules/LC101-zero-grad-in-accumulation.md``."""
    from loopcheck.catalog import lookup

    info = lookup(code)
    return f"{RULE_DOCS_URL}{code}-{info.name}.md" if info else RULE_DOCS_URL
