"""What a runtime session presents at exit, besides the JSON report: the HTML page, the findings
in a CI format and the summary on stderr. ``loopcheck run`` and ``watch()`` fill an ``Outputs``;
the session calls ``present`` once, with the final report (the merged one on rank 0 of a
distributed job; other ranks present nothing). A failure here costs one line on stderr, never
the script's exit code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


@dataclass
class Outputs:
    report: str | None = None  # JSON report path (the session writes it)
    html: str | None = None
    output_format: str = "text"  # text: the summary only; json|sarif|github|junit: also the findings so
    output_file: str | None = None  # ... written here, else to stdout after the script's own output
    quiet: bool = False
    summary: bool = True
    color: str = "auto"

    def present(self, data: dict[str, Any], print_summary: bool) -> None:
        if self.html:
            _attempt(f"write the HTML report to {self.html}", _write_html, data, self.html)
        if self.output_format != "text":
            _attempt(f"write the {self.output_format} findings", _write_format, data, self.output_format,
                     self.output_file)
        if print_summary:
            _attempt("print the summary", _print_summary, data, self.quiet, self.color)


def presents(data: dict[str, Any]) -> bool:
    """Whether this process presents the run: a single process, or the rank holding the merged report."""
    section = data.get("distributed") or {}
    return bool(section.get("merged")) or int(section.get("world_size") or 1) < 2


def _attempt(what: str, function: Any, *args: Any) -> None:
    try:
        function(*args)
    except Exception as exc:  # noqa: BLE001 - presentation never decides the run's outcome
        try:
            print(f"loopcheck: could not {what}: {exc}", file=sys.stderr)
        except Exception:  # noqa: BLE001, S110 - stderr may be closed at exit
            pass


def _write_html(data: dict[str, Any], path: str) -> None:
    from . import html

    html.write(data, path)


def _write_format(data: dict[str, Any], fmt: str, path: str | None) -> None:
    from .commands import ci_text, emit

    sys.stdout.flush()  # after everything the script printed
    emit(ci_text(data, fmt), path)


def _print_summary(data: dict[str, Any], quiet: bool, color: str) -> None:
    from loopcheck.runtime.output.summary import render_summary
    from loopcheck.terminal import Style

    text = render_summary(data, quiet, style=Style.for_stream(sys.stderr, color))
    if text:
        sys.stderr.write(text)
        sys.stderr.flush()
