"""The live status line of ``loopcheck run`` on a terminal:

    loopcheck: step 1,240 · 4 backward passes/step · 1 finding (LC101) · 0:03:12

It goes to stderr, only when stderr is a terminal, not in CI (``CI`` set), only on rank 0, and
not with ``--no-progress`` or ``LOOPCHECK_NO_PROGRESS=1``. A daemon thread redraws it once a
second after the first few seconds; it reads the session's counters (plain Python ints) and
never touches the training thread's work.

Not interleaving with the script's output: while the line is shown, ``sys.stdout`` and
``sys.stderr`` are thin proxies whose ``write`` first erases the line (so the script's text
starts on a clean line and the status is redrawn below it a second later); the line is drawn
only when the script's last write ended a line; and a script that draws its own ``\\r``
progress bar (tqdm) turns the status line off for the rest of the run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

from loopcheck.terminal import isatty, width

DELAY_S = 3.0
EVERY_S = 1.0
_ERASE = "\r\033[K"


def wanted(stream: TextIO | None = None, disabled: bool = False) -> bool:
    if disabled or os.environ.get("LOOPCHECK_NO_PROGRESS") or os.environ.get("CI"):
        return False
    if os.environ.get("RANK", "0") != "0" or os.environ.get("LOCAL_RANK", "0") != "0":
        return False
    return isatty(sys.stderr if stream is None else stream)


class RunProgress:
    def __init__(self, session: Any, stream: TextIO | None = None) -> None:
        self.session = session
        self.stream = sys.stderr if stream is None else stream
        self.lock = threading.RLock()
        self.visible = False
        self.at_line_start = True
        self.off = False
        self.stopped = threading.Event()
        self.started = time.monotonic()
        self.thread: threading.Thread | None = None
        self.codes: list[str] = []
        self.saved: tuple[Any, Any] | None = None

    def start(self) -> RunProgress:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Erasing(sys.stdout, self), _Erasing(sys.stderr, self)
        self.thread = threading.Thread(target=self._loop, name="loopcheck-progress", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Erase the line and give the streams back (idempotent); before the summary is printed."""
        self.stopped.set()
        with self.lock:
            self._erase()
            self.off = True
            if self.saved is not None:
                out, err = self.saved
                if isinstance(sys.stdout, _Erasing) and sys.stdout.progress is self:
                    sys.stdout = out
                if isinstance(sys.stderr, _Erasing) and sys.stderr.progress is self:
                    sys.stderr = err
                self.saved = None

    def _loop(self) -> None:
        if self.stopped.wait(DELAY_S):
            return
        while not self.stopped.is_set():
            try:
                self._draw(self.text())
            except Exception:  # noqa: BLE001 - a status line is never worth an error
                return
            self.stopped.wait(EVERY_S)

    def text(self) -> str:
        session = self.session
        steps = session.step_index()
        backward = getattr(getattr(session, "tracker", None), "seq", 0)
        try:
            self.codes = sorted(session.findings.codes())
        except RuntimeError:  # the training thread added a finding while the set was read
            pass
        codes = self.codes
        elapsed = int(time.monotonic() - self.started)
        parts = [f"step {steps:,}"]
        if steps:
            parts.append(f"{backward / steps:.3g} backward passes/step")
        parts.append(f"{len(codes)} finding{'s' if len(codes) != 1 else ''}"
                     + (f" ({', '.join(codes[:4])}{', ...' if len(codes) > 4 else ''})" if codes else ""))
        parts.append(f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}")
        return ("loopcheck: " + " · ".join(parts))[: max(20, width(self.stream) - 1)]

    def _draw(self, text: str) -> None:
        with self.lock:
            if self.off or not self.at_line_start:
                return
            self.stream.write(_ERASE + text)
            self.stream.flush()
            self.visible = True

    def _erase(self) -> None:
        if self.visible:
            self.visible = False
            try:
                self.stream.write(_ERASE)
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def before_write(self, text: str) -> None:
        """Called with the lock held, before the script's ``text`` goes out."""
        self._erase()
        if "\r" in text:
            self.off = True  # the script draws its own progress line
        if text:
            self.at_line_start = text.endswith("\n")


class _Erasing:
    """``sys.stdout``/``sys.stderr`` while the status line is on: everything is the real
    stream's, except that ``write`` erases the status line first."""

    def __init__(self, inner: Any, progress: RunProgress) -> None:
        self.inner = inner
        self.progress = progress

    def write(self, text: str) -> int:
        with self.progress.lock:
            self.progress.before_write(text)
            return self.inner.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
