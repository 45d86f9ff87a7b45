"""Runtime findings as the static checker's ``Finding`` objects, so ``loopcheck run`` and
``loopcheck report show`` print them in ``loopcheck check``'s layout and feed the same writers
(JSON, SARIF, GitHub annotations, JUnit).

A runtime finding has a line but no span: the column is the first non-blank character of the
line (the report's ``col`` when it has one) and the span runs to the end of the line. Paths are
shown relative to the working directory when the file is below it, as ``check`` shows them.
"""

from __future__ import annotations

import linecache
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from loopcheck.findings import Finding

CONTEXT = 2  # source lines shown before and after the finding's line


def display_path(path: str | None) -> str:
    if not path:
        return "<unknown>"
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def source_context(finding: dict[str, Any]) -> tuple[int, list[str]]:
    """``(first line number, lines)`` around the finding's line: the report's ``source`` when it
    has one, else the file as it is now (empty when unreadable)."""
    recorded = finding.get("source")
    if isinstance(recorded, dict) and isinstance(recorded.get("lines"), list):
        return int(recorded.get("start_line") or 1), [str(line).rstrip("\n") for line in recorded["lines"]]
    path, line = finding.get("file"), finding.get("line")
    if not path or not isinstance(line, int) or line < 1 or not os.path.isfile(path):
        return 0, []
    start = max(1, line - CONTEXT)
    lines = [linecache.getline(path, n).rstrip("\n") for n in range(start, line + CONTEXT + 1)]
    while lines and not lines[-1] and linecache.getline(path, start + len(lines) - 1) == "":
        lines.pop()  # past the end of the file
    return start, lines


def flagged_line(finding: dict[str, Any]) -> str:
    start, lines = source_context(finding)
    index = (finding.get("line") or 0) - start
    return lines[index] if 0 <= index < len(lines) else ""


def occurrence(finding: dict[str, Any], world_size: int = 1) -> str:
    """``4 times, first at optimizer step 0`` (``in 4 sampled windows`` when sampled), plus the ranks."""
    count = int(finding.get("count") or 1)
    if finding.get("sampled"):
        how = f"seen in {count} sampled window{'s' if count != 1 else ''}"
    else:
        how = "once" if count == 1 else f"{count} times"
    text = how + (f", first at optimizer step {finding['first_step']}" if isinstance(finding.get("first_step"), int)
                  else "")
    ranks = finding.get("ranks")
    if ranks and world_size > 1:
        text += " on every rank" if len(ranks) >= world_size else \
            f" on rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in sorted(ranks))} only"
    return text


def to_finding(finding: dict[str, Any]) -> Finding:
    from loopcheck.engine import _fingerprint  # the static side's hash: one finding, one fingerprint

    source = flagged_line(finding)
    col = finding.get("col")
    if not isinstance(col, int) or col < 1:
        col = len(source) - len(source.lstrip()) + 1 if source.strip() else 1
    line = finding.get("line") if isinstance(finding.get("line"), int) else 0
    end_col = len(_code_part(source)) + 1 if source.strip() else 0
    return Finding(display_path(finding.get("file")), line, col, str(finding.get("code", "")),
                   str(finding.get("name", "")), str(finding.get("message", "")),
                   str(finding.get("severity", "warning")), end_line=line if end_col else 0, end_col=end_col,
                   source_line=source, fingerprint=_fingerprint(str(finding.get("code", "")), source) if source else "")


def _code_part(line: str) -> str:
    """The line without a trailing comment (the caret underlines the code only)."""
    import io
    import tokenize

    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line[:token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement: keep it whole
        pass
    return line.rstrip()


def to_findings(data: dict[str, Any], with_occurrence: bool = False) -> list[Finding]:
    """The report's findings in its order; ``with_occurrence`` appends how often and from which
    step to each message (for CI formats, where nothing else can say it)."""
    world = int((data.get("distributed") or {}).get("world_size") or 1)
    out = []
    for raw in data.get("findings") or []:
        finding = to_finding(raw)
        if with_occurrence:
            finding = replace(finding, message=f"{finding.message} ({occurrence(raw, world)}; loopcheck run)")
        out.append(finding)
    return out


def at_least(findings: Sequence[dict[str, Any]], level: str) -> bool:
    """Whether a finding reaches ``level`` (``never``, ``info``, ``warning``, ``error``): ``--fail-on``."""
    ranks = {"info": 0, "warning": 1, "error": 2}
    if level == "never":
        return False
    return any(ranks.get(str(f.get("severity")), 1) >= ranks[level] for f in findings)
