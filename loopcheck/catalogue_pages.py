"""The rule catalogue pages under ``rules/``, generated from each rule's docstring and examples.

``python -m loopcheck.catalogue_pages`` rewrites them; a test fails when one is stale, so the
pages, ``loopcheck rule LC101`` and the executed examples can never disagree.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from loopcheck.catalog import CODES
from loopcheck.rules import RULES, Rule

PAGES = Path(__file__).resolve().parent.parent / "rules"


def page_name(code: str) -> str:
    return f"{code}-{CODES[code].name}.md"


def render_page(code: str, rule: type[Rule] | None) -> str:
    info = CODES[code]
    where = ", ".join(w for w, on in (("static", rule is not None), ("runtime", info.runtime)) if on)
    lines = [f"# {code} {info.name}", "", f"Level: **{info.level.value}** · checked: {where or 'not yet'}", ""]
    if rule is None:
        lines += ["## What it does", f"Reports that {info.summary}.", "",
                  "Detected by the runtime checker (`loopcheck run`) only: the problem depends on values "
                  "that the source code does not show.", ""]
        return "\n".join(lines)
    lines += [textwrap.dedent(sys.modules[rule.__module__].__doc__ or "").strip(), ""]
    lines += ["## Fix availability",
              "`loopcheck check --fix` applies the fix above where the model is certain enough (it moves, "
              "inserts or rewrites only the flagged statements; fixes that may change more than the finding "
              "need `--unsafe-fixes`); elsewhere the finding is reported without a fix." if rule.fixable else "No automatic fix: the right change depends on intent.", ""]
    lines += ["## Example", "```python", textwrap.dedent(rule.INVALID[0]).strip(), "```", "",
              "Use instead:", "```python", textwrap.dedent(rule.VALID[0]).strip(), "```", ""]
    if len(rule.INVALID) > 1:
        lines += ["## More flagged code", ""]
        for example in rule.INVALID[1:]:
            lines += ["```python", textwrap.dedent(example).strip(), "```", ""]
    if len(rule.VALID) > 1:
        lines += ["## Not flagged", ""]
        for example in rule.VALID[1:]:
            lines += ["```python", textwrap.dedent(example).strip(), "```", ""]
    lines += ["## Suppression", f"`# noqa: {code}` or `# loopcheck: ignore[{info.name}]` on the flagged line.", ""]
    return "\n".join(lines)


def expected_pages() -> dict[str, str]:
    return {page_name(code): render_page(code, RULES.get(code)) for code in CODES}


def write_pages(directory: Path = PAGES) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_pages().items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_pages():
        print(f"wrote {path}")
