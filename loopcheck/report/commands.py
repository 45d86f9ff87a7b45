"""``loopcheck report ACTION``: ``show`` a saved report again (text or a CI format), write its
``html`` page, or ``merge`` the parts of a distributed run.

    loopcheck report show out/r.json [--output-format sarif -o r.sarif] [--fail-on error]
    loopcheck report html out/r.json -o run.html
    loopcheck report merge out/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loopcheck.output import FORMATS
from loopcheck.terminal import CHOICES, Style, isatty, unicode_ok, width

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_arguments(report: argparse.ArgumentParser) -> None:
    actions = report.add_subparsers(dest="report_command", metavar="ACTION")
    show = actions.add_parser(
        "show", help="print a saved report's summary again (or as json, sarif, github, junit)",
        description="Print the summary of a report that `loopcheck run --report PATH` wrote, in the layout of the "
                    "end of `loopcheck run`, with terminal charts of backward passes and memory per step; or "
                    "its findings in a CI format.")
    show.add_argument("report", metavar="REPORT", help="a report JSON file")
    add_format_arguments(show)
    show.add_argument("--fail-on", choices=("never", "info", "warning", "error"), default="never",
                      help="exit 1 when the report has a finding at or above this level (default: never)")
    show.add_argument("--quiet", action="store_true", help="print only the findings, not the counters and charts")
    show.add_argument("--no-charts", dest="charts", action="store_false",
                      help="leave out the charts of backward passes and memory per step (drawn only on a terminal)")
    show.add_argument("--color", choices=CHOICES, default="auto", help="colour the text (default: on a terminal)")

    html = actions.add_parser("html", help="write a report's HTML page (one self-contained file with plots)",
                              description="Write the HTML page of a saved runtime report: findings with their "
                                          "source lines and rule pages, plots against the optimizer step, ranks.")
    html.add_argument("report", metavar="REPORT", help="a report JSON file")
    html.add_argument("--output", "-o", metavar="PATH", help="where to write the page (default: REPORT with .html)")

    from loopcheck.runtime.output.merge import add_merge_arguments

    add_merge_arguments(actions)


def add_format_arguments(parser: argparse.ArgumentParser) -> None:
    """``--output-format`` and ``--output-file`` as ``loopcheck check`` has them (``run`` too)."""
    parser.add_argument("--output-format", choices=FORMATS, default="text",
                        help="text for people (default), json for tools, sarif for code scanning, github for "
                             "pull-request annotations, junit for CI test reports")
    parser.add_argument("--output-file", "-o", metavar="PATH", help="write the findings there instead of stdout")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "report_command", None)
    if action == "show":
        return show(args)
    if action == "html":
        return html(args)
    if action == "merge":
        from loopcheck.runtime.output.merge import merge_directory

        return merge_directory(args.directory, args.output, args.quiet)
    print("loopcheck report: an ACTION is required (show, html, merge)", file=sys.stderr)
    return EXIT_ERROR


def _load(path: str) -> dict[str, Any] | None:
    from .data import ReportError, load

    try:
        return load(path)
    except ReportError as exc:
        print(f"loopcheck report: error: {exc}", file=sys.stderr)
        return None


def show(args: argparse.Namespace) -> int:
    data = _load(args.report)
    if data is None:
        return EXIT_ERROR
    if args.output_format == "text":
        stream = sys.stdout
        charts = args.charts and not args.quiet and isatty(stream)  # a pipe gets what `run` printed
        text = summary_text(data, args.quiet, Style.for_stream(stream, args.color), charts=charts, stream=stream)
    else:
        text = ci_text(data, args.output_format)
    if not emit(text, args.output_file):
        return EXIT_ERROR
    from .findings import at_least

    return EXIT_FINDINGS if at_least(data.get("findings") or [], args.fail_on) else EXIT_OK


def summary_text(data: dict[str, Any], quiet: bool, style: Style, charts: bool, stream: Any = None) -> str:
    from loopcheck.runtime.output.summary import render_summary

    from .show import chart_lines

    extra = chart_lines(data, width(stream), unicode_ok(stream)) if charts else []
    return render_summary(data, quiet, style=style, charts=extra)


def ci_text(data: dict[str, Any], fmt: str) -> str:
    """The report's findings in a CI format, through ``loopcheck check``'s writers."""
    from loopcheck.output import render

    from .findings import to_findings

    findings = to_findings(data, with_occurrence=True)
    return render(findings, fmt, files=sorted({f.filename for f in findings}))


def emit(text: str, path: str | None) -> bool:
    if not path:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"loopcheck: error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def html(args: argparse.Namespace) -> int:
    from . import html as page

    data = _load(args.report)
    if data is None:
        return EXIT_ERROR
    target = args.output or str(Path(args.report).with_suffix(".html"))
    try:
        page.write(data, target)
    except OSError as exc:
        print(f"loopcheck report: error: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"loopcheck: wrote {target}", file=sys.stderr)
    return EXIT_OK
