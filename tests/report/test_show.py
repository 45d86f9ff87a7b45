"""``loopcheck report show``: the end-of-run summary again, the same text as the run printed,
and compact terminal charts where the terminal allows."""
from __future__ import annotations

import io

import pytest

from loopcheck.cli import main
from loopcheck.report import show, terminal_chart

from .conftest import ROOT, Run
from .synthetic import SPIKE_STEP, report


def test_show_prints_what_the_run_printed(runs: dict[str, Run], capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run = runs["lc101"]
    assert run.exit_code == 0
    monkeypatch.chdir(ROOT)
    assert main(["report", "show", str(run.json), "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out == run.stderr
    assert out.splitlines()[-3:] == [
        "runtime/lc101_zero_grad_in_window.py:13:5: LC101 gradients are reset before each of the 4 backward passes "
        "of a window that ends in one optimizer step: only the last micro-batch reaches the step; zero them in the "
        "step branch (4 times, first at optimizer step 0)",
        "        optimizer.zero_grad()  # expect: LC101",
        "        ^^^^^^^^^^^^^^^^^^^^^"]


def test_quiet_and_colour(runs: dict[str, Run], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "show", str(runs["lc101"].json), "--quiet", "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "optimizer steps" not in out
    assert "\033[1;31mLC101\033[0m" in out


def test_charts_keep_the_spike_and_fall_back_to_ascii() -> None:
    data = report(100_000)
    lines = show.chart_lines(data, width=100, unicode=True)
    backward = next(line for line in lines if "backward passes over steps" in line)
    spark = backward.split("steps", 1)[1].split(" max")[0].strip()
    assert len(spark) == 100 - 48 and spark.count("█") == 1  # the one 64-pass window
    assert spark.index("█") == SPIKE_STEP * len(spark) // 100_000
    assert "max 64 (steps 0-99999)" in backward
    memory = next(line for line in lines if "memory over steps" in line)
    assert "1.86 GiB -> " in memory
    plain = show.chart_lines(data, width=100, unicode=False)
    assert all(ch.isascii() for line in plain for ch in line)
    assert show.chart_lines({"schema": "loopcheck-runtime-report/1"}) == []


def test_sparkline_columns_take_the_max() -> None:
    assert terminal_chart.columns([1, 9, 1, 1, 1, 1], 3) == [9, 1, 1]
    assert terminal_chart.sparkline([0, 4, 8], 3) == "▁▅█"
    assert terminal_chart.sparkline([None, None], 5) == ""


def test_show_on_a_terminal_draws_charts(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import json

    path = tmp_path / "r.json"
    path.write_text(json.dumps(report(2_000)))

    class Tty(io.StringIO):
        encoding = "utf-8"

        def isatty(self) -> bool:
            return True

    out = Tty()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["report", "show", str(path), "--color", "never"]) == 0
    text = out.getvalue()
    assert "backward passes over steps" in text and "memory over steps" in text
    assert main(["report", "show", str(path), "--no-charts"]) == 0
    assert out.getvalue().count("memory over steps") == 1
