"""A progress bar on stderr for long runs on a terminal: never in CI logs, pipes or short runs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_DELAY_S = 1.0  # shown only once a run has taken this long
_EVERY_S = 0.1  # redraw at most this often
_WIDTH = 30


class Progress:
    def __init__(self, total: int, what: str = "files", stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.what, self.count = total, what, 0
        self.enabled = total > 0 and _isatty(self.stream)
        self.start = self.last = time.monotonic()
        self.shown = False

    def tick(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < _DELAY_S or now - self.last < _EVERY_S and self.count < self.total:
            return
        self.last, self.shown = now, True
        done = _WIDTH * self.count // self.total
        self.stream.write(f"\rloopcheck: [{'#' * done}{'.' * (_WIDTH - done)}] {self.count}/{self.total} {self.what}")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
