"""Colour decisions of loopcheck.terminal: --color beats the environment, NO_COLOR beats FORCE_COLOR."""
from __future__ import annotations

import io

import pytest

from loopcheck.terminal import Style, unicode_ok, use_color


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)


def test_auto_colours_terminals_only() -> None:
    assert use_color(_Tty()) is True
    assert use_color(io.StringIO()) is False


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert use_color(io.StringIO()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(_Tty()) is False
    assert use_color(_Tty(), "always") is True  # the flag is the user's last word
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert use_color(_Tty()) is False
    assert use_color(io.StringIO(), "never") is False


def test_style_is_plain_when_off() -> None:
    assert Style(False).severity("LC101", "error") == "LC101"
    assert Style(True).severity("LC101", "error") == "\033[1;31mLC101\033[0m"
    assert Style(True).paint("", "red") == ""


def test_unicode_detection() -> None:
    assert unicode_ok(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert not unicode_ok(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))


def test_check_layout_in_colour_and_plain() -> None:
    from loopcheck.findings import Finding
    from loopcheck.output import render

    finding = Finding("train.py", 13, 5, "LC101", "zero-grad-in-accumulation", "gradients reset", "error",
                      end_line=13, end_col=26, source_line="    optimizer.zero_grad()")
    plain = render([finding], "text")
    assert plain == ("train.py:13:5: LC101 gradients reset\n        optimizer.zero_grad()\n"
                     "        ^^^^^^^^^^^^^^^^^^^^^\n")
    coloured = render([finding], "text", style=Style(True))
    assert "\033[1;31mLC101\033[0m" in coloured and "\033[1mtrain.py\033[0m" in coloured
    assert _strip_ansi(coloured) == plain


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\033\[[0-9;]*m", "", text)
