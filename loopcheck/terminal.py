"""Colour and width on a terminal, shared by every command that prints for people.

Colour follows the conventions users set once for all their tools: ``--color never`` or a non-empty
``NO_COLOR`` turn it off (https://no-color.org), ``--color always`` or a non-empty ``FORCE_COLOR``
turn it on, otherwise it is on only when the stream is a terminal and ``TERM`` is not ``dumb``.

    style = Style.for_stream(sys.stderr, choice)
    print(style.bold("train.py") + style.cyan(":"), file=sys.stderr)
"""

from __future__ import annotations

import os
from typing import TextIO

CHOICES = ("auto", "always", "never")

_RESET = "\033[0m"
_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}


def isatty(stream: TextIO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def use_color(stream: TextIO | None, choice: str = "auto") -> bool:
    """Whether to colour what goes to ``stream``; ``choice`` is ``--color`` (auto, always, never)."""
    if choice == "never":
        return False
    if choice == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return isatty(stream) and os.environ.get("TERM") != "dumb"


def width(stream: TextIO | None, default: int = 80) -> int:
    """Columns of the terminal behind ``stream`` (``COLUMNS`` wins; ``default`` when unknown)."""
    import shutil  # imports the compression modules: not at every start

    try:
        return shutil.get_terminal_size((default, 24)).columns if isatty(stream) or os.environ.get("COLUMNS") \
            else default
    except (OSError, ValueError):
        return default


def unicode_ok(stream: TextIO | None) -> bool:
    """Whether ``stream`` can print block characters (``▁▂▃``); ASCII fallbacks otherwise."""
    encoding = (getattr(stream, "encoding", None) or "ascii").lower().replace("-", "")
    return encoding in ("utf8", "utf16", "utf32") or encoding.startswith("utf")


class Style:
    """ANSI styling that is a no-op when colour is off: ``style.red("x")`` is ``"x"`` then."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO | None, choice: str = "auto") -> Style:
        return cls(use_color(stream, choice))

    def paint(self, text: str, *names: str) -> str:
        if not self.enabled or not text or not names:
            return text
        return "\033[" + ";".join(_CODES[n] for n in names) + "m" + text + _RESET

    def bold(self, text: str) -> str:
        return self.paint(text, "bold")

    def dim(self, text: str) -> str:
        return self.paint(text, "dim")

    def red(self, text: str) -> str:
        return self.paint(text, "red")

    def green(self, text: str) -> str:
        return self.paint(text, "green")

    def yellow(self, text: str) -> str:
        return self.paint(text, "yellow")

    def cyan(self, text: str) -> str:
        return self.paint(text, "cyan")

    def link(self, text: str, url: str) -> str:
        """``text`` as a terminal hyperlink to ``url`` (OSC 8; terminals without it show the text)."""
        if not self.enabled or not url:
            return text
        return f"\033]8;;{url}\033\\{text}\033]8;;\033\\"

    def severity(self, text: str, severity: str) -> str:
        """A rule code or level in its severity's colour: errors red, warnings yellow, info cyan."""
        colour = {"error": "red", "warning": "yellow"}.get(severity, "cyan")
        return self.paint(text, "bold", colour)


PLAIN = Style(False)
