"""Rendering findings: ``full`` and ``concise`` for people, ``json`` for tools, ``sarif``/``github``/
``junit`` for CI (``loopcheck.formats``), and ``--statistics``.

``full`` (check's default) shows each finding's line with a caret under the span and the address of
the rule's page (``--show-fixes``: also what ``--fix`` would do); ``concise``, or ``full`` without
the source (``--no-show-source``), one line per finding (on a colour terminal its code links to the
rule's page). ``text`` is ``full`` without the page
line (the layout the runtime checker's summary shares).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from loopcheck.catalog import NOT_ANALYSED
from loopcheck.config import Options
from loopcheck.findings import Finding
from loopcheck.terminal import PLAIN, Style

FORMATS = ("text", "json", "sarif", "github", "junit")


def render(findings: Sequence[Finding], fmt: str, show_source: bool = True, files: Sequence[str] = (),
           options: Options = Options(), style: Style = PLAIN, show_fixes: bool = False) -> str:
    """``files``: display names of every checked file (JUnit lists the clean ones too);
    ``options``: the rule options, for SARIF's fixes; ``style``: colours of the text formats
    (``loopcheck.terminal``); ``show_fixes``: the fix of each finding under it (``full``)."""
    if fmt == "json":
        return json.dumps([f.as_json() for f in findings], indent=2) + "\n"
    if fmt == "sarif":
        from loopcheck.formats import sarif

        return sarif.render(findings, options)
    if fmt == "github":
        from loopcheck.formats import github

        return github.render(findings)
    if fmt == "junit":
        from loopcheck.formats import junit

        return junit.render(findings, files)
    if fmt == "concise":
        return "".join(_text(f, False, style, link=True) for f in findings)
    full = fmt == "full" and show_source  # --no-show-source: one line per finding, as before
    return "".join(_text(f, show_source, style, link=fmt == "full", page=full, show_fix=full and show_fixes)
                   for f in findings)


def _text(finding: Finding, show_source: bool, style: Style = PLAIN, link: bool = False, page: bool = False,
          show_fix: bool = False) -> str:
    """``path:line:col: CODE message`` and the flagged line with a caret under the span, coloured
    as ruff does: bold path, cyan separators, the code in its severity's colour. ``link``: the
    code links to the rule's page where the terminal shows colour; ``page``: the page's address
    under it; ``show_fix``: what ``--fix`` would do."""
    from loopcheck.formats import rule_url

    mark = style.cyan("[*]") + " " if finding.fixable and finding.fix_safe else ""
    colon = style.cyan(":")
    code = style.severity(finding.code, finding.severity)
    if link:
        code = style.link(code, rule_url(finding.code))
    head = f"{style.bold(finding.filename)}{colon}{finding.line}{colon}{finding.col}{colon} {code} {mark}{finding.message}\n"
    body = ""
    if show_source and finding.source_line.strip():
        line = finding.source_line.rstrip().expandtabs(4)
        width = max(1, (finding.end_col - finding.col) if finding.end_line == finding.line
                    else len(line) - finding.col + 1)
        body = f"    {line}\n    {' ' * (finding.col - 1)}{style.severity('^' * width, finding.severity)}\n"
    if show_fix and finding.fix_message is not None:
        how = "--fix" if finding.fix_safe else "--fix --unsafe-fixes"
        body += f"    {style.cyan('= fix')} ({how}): {finding.fix_message}\n"
    if page:
        body += f"    {style.cyan('= rule')}: {style.dim(rule_url(finding.code))}\n"
    return head + body


def summary(findings: Sequence[Finding], files: int, fixed: int = 0, missing: int = 0) -> str:
    """The closing lines of a text report; ``missing``: given paths that do not exist."""
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    done = f"Fixed {fixed} problem{'s' if fixed != 1 else ''}. " if fixed else ""
    if missing:  # never "All checks passed" when something the user named was not checked
        checked += f"; {missing} path{'s' if missing != 1 else ''} not found"
    problems = [f for f in findings if f.code != NOT_ANALYSED.code]
    skipped = len(findings) - len(problems)
    if skipped:
        checked += f"; {skipped} not analysed ({NOT_ANALYSED.code})"
    if not problems:
        return f"{done}{'No problems found' if missing or skipped else 'All checks passed!'} ({checked})\n"
    count = len(problems)
    text = f"{done}Found {count} problem{'s' if count != 1 else ''} in {checked}.\n"
    safe = sum(f.fixable and f.fix_safe for f in findings)
    unsafe = sum(f.fixable and not f.fix_safe for f in findings)
    if safe:
        text += f"[*] {safe} fixable with `--fix`.\n"
    if unsafe:
        text += f"{unsafe} more fixable with `--fix --unsafe-fixes`.\n"
    return text


def statistics(findings: Sequence[Finding]) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter(f.code for f in findings if f.fixable)
    width = max((len(str(n)) for n in counts.values()), default=1)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(f"{n:>{width}}\t{code}\t{name}" + (f"\t[*] {fixable[code]} fixable" if fixable[code] else "") + "\n"
                   for (code, name), n in rows)
