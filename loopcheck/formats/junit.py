"""JUnit XML for CI test-report viewers (GitLab, Jenkins, GitHub test-report actions).

One ``<testsuite name="loopcheck">``. Each finding is a failing ``<testcase>`` whose
``classname`` is the file and whose ``name`` is the code and position (one failure per test
case, as the strictest JUnit schemas require); each checked file without findings is one passing
test case, so a clean run still shows what was checked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from loopcheck.findings import Finding


def render(findings: Sequence[Finding], files: Sequence[str] = ()) -> str:
    """``files``: display names of every checked file (those without findings pass)."""
    failing = {f.filename for f in findings}
    clean = sorted(set(files) - failing)
    tests = len(findings) + len(clean)
    counts = {"tests": str(tests), "failures": str(len(findings)), "errors": "0"}
    root = ET.Element("testsuites", name="loopcheck", **counts)
    suite = ET.SubElement(root, "testsuite", name="loopcheck", skipped="0", **counts)
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=f.filename, name=f"{f.code} {f.name} at {f.line}:{f.col}",
                             file=f.filename, line=str(f.line))
        failure = ET.SubElement(case, "failure", message=f"{f.code} {f.message}", type=f.code)
        failure.text = f"{f.filename}:{f.line}:{f.col}: {f.code} {f.message}"
    for name in clean:
        ET.SubElement(suite, "testcase", classname=name, name="loopcheck", file=name)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
