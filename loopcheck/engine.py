"""Check one file: skip it cheaply, parse it once, build the model once, run the rules.

Costs are paid only where needed: a file whose text cannot hold what any selected rule looks
for is never parsed, and positions (a libcst metadata pass) are resolved only for files that
have findings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.catalog import CODES, SYNTAX_ERROR
from loopcheck.config import Options
from loopcheck.findings import Finding
from loopcheck.selection import resolve
from loopcheck.suppression import is_suppressed

if TYPE_CHECKING:
    import libcst as cst

    from loopcheck.fixes import Fix
    from loopcheck.project import Imported
    from loopcheck.rules import Rule, Violation

@lru_cache(maxsize=None)
def _rules(codes: frozenset[str]) -> tuple[object, ...]:
    from loopcheck.rules import RULES

    return tuple(RULES[code]() for code in sorted(codes) if code in RULES)


def required_texts(codes: frozenset[str]) -> frozenset[str]:
    """Substrings a file must contain for any of ``codes`` to find something in it."""
    return frozenset(text for rule in _rules(codes) for text in rule.requires)  # type: ignore[attr-defined]


def check_source(source: str, filename: str = "<string>", select: Iterable[str] | None = None) -> list[Finding]:
    """Findings for ``source`` with the default rules (or ``select``, ruff-style selectors)."""
    codes = resolve(select) if select is not None else resolve()
    return check_text(source, filename, codes)


def check_text(source: str, filename: str, codes: frozenset[str], options: Options = Options(),
               project: Imported | None = None) -> list[Finding]:
    return [finding for finding, _ in analyse(source, filename, codes, options, project)[1]]


def analyse(source: str, filename: str, codes: frozenset[str], options: Options = Options(),
            project: Imported | None = None) -> tuple[cst.Module | None, list[tuple[Finding, Fix | None]]]:
    """The parsed module (None when skipped or unparsable) and each finding with its fix, if any.
    ``project``: facts of the project modules the file imports (``loopcheck.project.for_file``)."""
    rules = [r for r in _rules(codes) if any(text in source for text in r.requires)  # type: ignore[attr-defined]
             and all(text in source for text in r.requires_all)]  # type: ignore[attr-defined]
    if not rules:
        return None, []
    import libcst as cst  # imported here: `loopcheck run` and files skipped above never pay for it

    from loopcheck.model import build

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return None, [(_python_syntax_error(filename, source) or
                       _syntax_error(filename, source, error.editor_line, error.editor_column, error.message), None)]
    except (RecursionError, MemoryError) as error:  # pathological nesting
        return None, [(_syntax_error(filename, source, 1, 1, f"could not be parsed: {type(error).__name__}"), None)]
    model = build(module, source, options, project)
    violations = []
    seen: set[tuple[str, int]] = set()
    for rule in rules:
        for violation in rule.check(model):  # type: ignore[attr-defined]
            key = (rule.code, id(violation.node))  # type: ignore[attr-defined]
            if key not in seen:
                seen.add(key)
                violations.append((rule, violation))
    return module, _findings(module, source, filename, violations) if violations else []


def _findings(module: cst.Module, source: str, filename: str,
              violations: list[tuple[Rule, Violation]]) -> list[tuple[Finding, Fix | None]]:
    """Positioned, unsuppressed findings for the rules' violations, in file order."""
    from loopcheck.positions import locate

    positions = locate(module, source, [n for _, v in violations for n in (v.node, v.stmt)])
    lines = source.splitlines()
    results = []
    for rule, violation in violations:
        where = positions[violation.node]
        stmt_line = positions[violation.stmt].start.line if violation.stmt in positions else where.start.line
        if is_suppressed(rule.code, lines, (where.start.line, stmt_line)):
            continue
        info, fix = CODES[rule.code], violation.fix
        results.append((Finding(
            filename=filename, line=where.start.line, col=where.start.column + 1, code=rule.code, name=info.name,
            message=violation.message or rule.message, severity=info.level.value, end_line=where.end.line,
            end_col=where.end.column + 1,
            source_line=lines[where.start.line - 1] if where.start.line <= len(lines) else "",
            fingerprint=_fingerprint(rule.code, module.code_for_node(violation.node)),
            fix_message=fix.message if fix else None, fix_safe=fix.safe if fix else True,
        ), fix))
    return sorted(results, key=lambda pair: pair[0])


def _fingerprint(code: str, statement: str) -> str:
    import hashlib

    normalised = " ".join(statement.split())
    return hashlib.sha1(f"{code}:{normalised}".encode()).hexdigest()[:16]


def _python_syntax_error(filename: str, source: str) -> Finding | None:
    """Python's own message and position (``expected ':'`` at 1:16) where it has one: clearer
    than the parser generator's list of expected tokens."""
    import ast

    try:
        ast.parse(source, filename)
    except SyntaxError as error:
        return _syntax_error(filename, source, error.lineno or 1, error.offset or 1, error.msg)
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _syntax_error(filename: str, source: str, line: int, col: int, message: str) -> Finding:
    lines = source.splitlines()
    first = re.sub(r"^.*?error at \d+:\d+:\s*", "", message.strip().splitlines()[0] if message.strip() else "")
    if not first or first.startswith("expected one of") and len(first) > 60:
        first = "invalid syntax"
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    return Finding(filename=filename, line=line, col=col, code=SYNTAX_ERROR.code, name=SYNTAX_ERROR.name,
                   message=f"syntax error: {first}", severity=SYNTAX_ERROR.level.value, end_line=line,
                   end_col=col, source_line=source_line, fingerprint=_fingerprint(SYNTAX_ERROR.code, source_line))


def read_source(path: Path) -> str:
    """The file's text as Python reads it (PEP 263 coding cookie, BOM); raises UnicodeDecodeError."""
    return read_source_and_encoding(path)[0]


def read_source_and_encoding(path: Path) -> tuple[str, str]:
    import io
    import tokenize

    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding
