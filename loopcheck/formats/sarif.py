"""SARIF 2.1.0 for GitHub code scanning (``github/codeql-action/upload-sarif``) and other viewers.

One run: ``tool.driver.rules`` has every code of the catalogue with its summary, its documentation
(the rule's catalogue page) and a ``helpUri`` to that page; each finding is a result with its
level, location, a ``partialFingerprints`` entry from ``Finding.fingerprint`` (so code scanning
tracks it across edits that move it) and, where loopcheck has a fix, a ``fixes`` entry whose
replacements are the fix's diff against the file.
"""

from __future__ import annotations

import json
import sys
import textwrap
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopcheck import __version__
from loopcheck.catalog import CODES, FILE_CODES, Code, Severity
from loopcheck.config import Options
from loopcheck.findings import Finding
from loopcheck.formats import REPOSITORY_URL, rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note", "opt-in": "warning"}
FINGERPRINT_KEY = "loopcheck/v1"


def render(findings: Sequence[Finding], options: Options = Options()) -> str:
    return json.dumps(document(findings, options), indent=2) + "\n"


def document(findings: Sequence[Finding], options: Options = Options()) -> dict[str, Any]:
    infos = [*CODES.values(), *FILE_CODES.values()]
    index = {info.code: i for i, info in enumerate(infos)}
    edits = _fix_replacements(findings, options)
    run = {
        "tool": {"driver": {
            "name": "loopcheck", "version": __version__, "semanticVersion": __version__,
            "informationUri": REPOSITORY_URL, "rules": [_rule(info) for info in infos],
        }},
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "results": [_result(f, index[f.code], edits.get(id(f))) for f in findings],
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def _rule(info: Code) -> dict[str, Any]:
    from loopcheck.catalogue_pages import render_page
    from loopcheck.rules import RULES

    summary = info.summary[0].upper() + info.summary[1:]
    rule = RULES.get(info.code)
    page = render_page(info.code, rule)
    doc = textwrap.dedent(sys.modules[rule.__module__].__doc__ or "").strip() if rule else page
    level = Severity.WARNING if info.level is Severity.OPT_IN else info.level
    return {
        "id": info.code, "name": info.name,
        "shortDescription": {"text": f"{info.code} {info.name}"},
        "fullDescription": {"text": summary},
        "help": {"text": doc, "markdown": page},
        "helpUri": rule_url(info.code),
        "defaultConfiguration": {"level": _LEVEL[level.value], "enabled": info.level is not Severity.OPT_IN},
        "properties": {"tags": ["pytorch", "training-loop"], "precision": "high"},
    }


def _result(f: Finding, rule_index: int, replacements: list[dict[str, Any]] | None) -> dict[str, Any]:
    region: dict[str, int] = {"startLine": max(1, f.line), "startColumn": max(1, f.col)}
    if f.end_line > f.line or f.end_line == f.line and f.end_col > f.col:
        region.update(endLine=f.end_line, endColumn=f.end_col)
    if f.source_line.strip():
        region["snippet"] = {"text": f.source_line}  # type: ignore[assignment]
    result: dict[str, Any] = {
        "ruleId": f.code, "ruleIndex": rule_index, "level": _LEVEL.get(f.severity, "warning"),
        "message": {"text": f.message},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(f.filename), "region": region}}],
    }
    if f.fingerprint:
        result["partialFingerprints"] = {FINGERPRINT_KEY: f.fingerprint}
    if f.fix_message is not None:
        fix: dict[str, Any] = {"description": {"text": f.fix_message + ("" if f.fix_safe else " (unsafe fix)")}}
        if replacements:
            fix["artifactChanges"] = [{"artifactLocation": _artifact(f.filename), "replacements": replacements}]
        result["fixes"] = [fix]
    return result


def _artifact(filename: str) -> dict[str, str]:
    path = Path(filename)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": urllib.parse.quote(path.as_posix()), "uriBaseId": "%SRCROOT%"}


def _fix_replacements(findings: Sequence[Finding], options: Options) -> dict[int, list[dict[str, Any]]]:
    """For each fixable finding (by ``id``), its fix as SARIF replacements: the file is checked
    again for the fixable codes only, each fix is applied on its own, and the change is diffed."""
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        if f.fix_message is not None:
            by_file.setdefault(f.filename, []).append(f)
    out: dict[int, list[dict[str, Any]]] = {}
    for filename, fixable in by_file.items():
        try:
            out.update(_file_replacements(filename, fixable, options))
        except Exception:  # noqa: BLE001, S112 - a fix we cannot express stays a description
            continue
    return out


def _file_replacements(filename: str, fixable: list[Finding],
                       options: Options) -> dict[int, list[dict[str, Any]]]:
    from loopcheck.engine import LazyProject, analyse, read_source
    from loopcheck.fixes import apply

    source = read_source(Path(filename))
    module, results = analyse(source, filename, frozenset(f.code for f in fixable), options, LazyProject(filename))
    if module is None:
        return {}
    fixes = {(r.code, r.line, r.col, r.fingerprint): fix for r, fix in results if fix is not None}
    out = {}
    for f in fixable:
        fix = fixes.get((f.code, f.line, f.col, f.fingerprint))
        if fix is not None:
            out[id(f)] = replacements(source, apply(module, fix).code)
    return out


def replacements(before: str, after: str) -> list[dict[str, Any]]:
    """Whole-line replacements that turn ``before`` into ``after`` (character offsets into
    ``before``; a pure insertion deletes nothing)."""
    import difflib

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    starts = [0]
    for line in old:
        starts.append(starts[-1] + len(line))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        change: dict[str, Any] = {"deletedRegion": {"charOffset": starts[i1], "charLength": starts[i2] - starts[i1]}}
        if j2 > j1:
            change["insertedContent"] = {"text": "".join(new[j1:j2])}
        out.append(change)
    return out
