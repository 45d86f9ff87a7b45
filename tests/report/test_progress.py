"""The status line of ``loopcheck run``: only on a terminal, erased before the script writes,
never drawn in the middle of the script's line, off for scripts with their own ``\\r`` bar."""
from __future__ import annotations

import io
import sys

import pytest

from loopcheck.report import progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeSession:
    class findings:  # noqa: N801
        @staticmethod
        def codes() -> set[str]:
            return {"LC101"}

    class tracker:  # noqa: N801
        seq = 48

    def step_index(self) -> int:
        return 12


def test_wanted_only_on_a_terminal_of_rank_0(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CI", "LOOPCHECK_NO_PROGRESS", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert progress.wanted(Tty())
    assert not progress.wanted(io.StringIO())
    assert not progress.wanted(Tty(), disabled=True)
    monkeypatch.setenv("RANK", "1")
    assert not progress.wanted(Tty())
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted(Tty())


def test_the_line_is_erased_before_the_script_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Tty()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    line = progress.RunProgress(FakeSession(), stream=terminal)
    monkeypatch.setattr(progress, "DELAY_S", 60.0)  # draw by hand only
    line.start()
    try:
        text = line.text()
        assert text.startswith("loopcheck: step 12 · 4 backward passes/step · 1 finding (LC101) · 0:00:0")
        line._draw(text)
        print("epoch 1 done")
        assert terminal.getvalue() == "\r\033[K" + text + "\r\033[Kepoch 1 done\n"
        sys.stdout.write("partial ")
        line._draw(text)  # the script's line is not finished: no status line in it
        assert terminal.getvalue().endswith("epoch 1 done\npartial ")
        sys.stderr.write("line\n")
        sys.stderr.write("\r 10%|#   |")  # the script's own progress bar
        line._draw(text)
        assert terminal.getvalue().endswith("\r 10%|#   |")
    finally:
        line.stop()
    assert sys.stdout is terminal and sys.stderr is terminal


def test_stop_erases_a_visible_line(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Tty()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(progress, "DELAY_S", 60.0)
    line = progress.RunProgress(FakeSession(), stream=terminal).start()
    line._draw("loopcheck: step 1")
    line.stop()
    line.stop()
    assert terminal.getvalue() == "\r\033[Kloopcheck: step 1\r\033[K"
    assert not isinstance(sys.stderr, progress._Erasing)
