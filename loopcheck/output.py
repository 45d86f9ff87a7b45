"""Rendering findings: ``text`` for people, ``json`` for tools, and ``--statistics``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from loopcheck.findings import Finding

FORMATS = ("text", "json")


def render(findings: Sequence[Finding], fmt: str, show_source: bool = True) -> str:
    if fmt == "json":
        return json.dumps([f.as_json() for f in findings], indent=2) + "\n"
    return "".join(_text(f, show_source) for f in findings)


def _text(finding: Finding, show_source: bool) -> str:
    head = f"{finding.filename}:{finding.line}:{finding.col}: {finding.code} {finding.message}\n"
    if not show_source or not finding.source_line.strip():
        return head
    line = finding.source_line.rstrip().expandtabs(4)
    width = max(1, (finding.end_col - finding.col) if finding.end_line == finding.line else len(line) - finding.col + 1)
    return f"{head}    {line}\n    {' ' * (finding.col - 1)}{'^' * width}\n"


def summary(findings: Sequence[Finding], files: int) -> str:
    if not findings:
        return f"All checks passed! ({files} file{'s' if files != 1 else ''} checked)\n"
    count = len(findings)
    return f"Found {count} problem{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''} checked.\n"


def statistics(findings: Sequence[Finding]) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "".join(f"{n:>{width}}\t{code}\t{name}\n" for (code, name), n in sorted(counts.items(),
                                                                                 key=lambda kv: (-kv[1], kv[0])))
