"""``watch``: the runtime checker as a context manager or decorator."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from .selection import Selection


class watch(contextlib.ContextDecorator):  # noqa: N801 - reads as a function at call sites
    """Watch the training code run inside the block (or the decorated function).

    ``report``: path of the JSON report; ``select``/``ignore``: codes, names or prefixes;
    ``summary``: print the summary to stderr on exit; ``quiet``: print only findings;
    ``lr_scaling``: a ``loopcheck.config.LrScaling`` reference for LC304/LC305;
    ``html``: path of the self-contained HTML report (plots, findings with their source lines).
    After the block, ``findings`` holds what was found. A ``watch`` inside an active one does
    nothing (the outer session sees everything).
    """

    def __init__(self, report: str | None = None, select: Iterable[str] | str | None = None,
                 ignore: Iterable[str] | str | None = None, summary: bool = True,
                 quiet: bool = False, lr_scaling: Any = None, html: str | None = None) -> None:
        self.selection = Selection.parse(select, ignore)
        self.lr_scaling = lr_scaling
        self.report = report
        self.summary = summary
        self.html = html
        self.quiet = quiet
        self.session: Any = None
        self.findings: list[Any] = []

    def __enter__(self) -> Any:
        from .session import Session, active_session

        if active_session() is not None:
            self.session = None
            return active_session()
        try:
            import torch  # noqa: F401 - the session needs it; say so in one line when it is missing
        except ImportError as exc:
            print(f"loopcheck: nothing to check: torch cannot be imported ({exc})", file=sys.stderr)
            return None
        self.session = Session(self.selection, self.lr_scaling).start()
        return self.session

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        session, self.session = self.session, None
        if session is None:
            return False
        how = "finished" if exc_type is None else exc_type.__name__
        session.stop(how)
        self.findings = session.findings.all()
        if self.summary or self.report or self.html:
            from loopcheck.report.outputs import Outputs

            session.write_outputs(Outputs(report=self.report, html=self.html, quiet=self.quiet,
                                          summary=self.summary))
        return False
