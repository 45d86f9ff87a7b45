"""GitHub Actions workflow commands: one annotation per finding, shown inline in pull requests.

``::error file=train.py,line=2,col=5,endLine=2,endColumn=26,title=LC101 zero-grad-in-accumulation::message``
(``warning`` for warning-level rules, ``notice`` for info). Values are escaped as the runner
expects: ``%``, CR and LF everywhere, and ``:`` and ``,`` in properties too.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopcheck.findings import Finding

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def render(findings: Sequence[Finding]) -> str:
    return "".join(annotation(f) + "\n" for f in findings)


def annotation(finding: Finding) -> str:
    props = {"file": finding.filename, "line": finding.line, "col": finding.col}
    if finding.end_line >= finding.line > 0 and finding.end_col > 0:
        props["endLine"] = finding.end_line
        props["endColumn"] = finding.end_col
    props["title"] = f"{finding.code} {finding.name}"
    head = ",".join(f"{key}={_property(str(value))}" for key, value in props.items())
    message = finding.message + (f" (fix: {finding.fix_message})" if finding.fix_message else "")
    return f"::{_COMMAND.get(finding.severity, 'warning')} {head}::{_data(message)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
