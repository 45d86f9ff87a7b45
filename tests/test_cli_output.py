"""`loopcheck check` for people and editors: full/concise formats with the rule's page, --show-fixes,
colour (--color, NO_COLOR, FORCE_COLOR), `rules --output-format json`, standard input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopcheck.catalog import CODES
from loopcheck.formats import rule_url
from tests.conftest import BUGGY, CLEAN

PAGE = rule_url("LC101")


def test_full_format_links_the_rule_page_and_concise_is_one_line(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "train.py")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("train.py:2:5: LC101 [*] ")
    assert lines[3] == f"    = rule: {PAGE}"
    assert PAGE.endswith("rules/LC101-zero-grad-in-accumulation.md")
    assert (Path(__file__).resolve().parents[1] / "rules" / PAGE.rsplit("/", 1)[1]).is_file()
    assert run_cli("check", "--output-format", "text", "train.py")[1] == out  # the former name
    concise = run_cli("check", "--output-format", "concise", "train.py")[1].splitlines()
    assert concise[0] == lines[0] and concise[1].startswith("Found 1 problem")


def test_show_fixes_says_what_fix_would_do(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    out = run_cli("check", "--show-fixes", "train.py")[1]
    (fix_line,) = [line for line in out.splitlines() if "= fix" in line]
    assert fix_line.startswith("    = fix (--fix): ") and "zero" in fix_line
    assert "= fix" not in run_cli("check", "train.py")[1]


@pytest.mark.parametrize(("args", "env", "coloured"), [
    ((), {}, False),  # not a terminal
    (("--color", "always"), {}, True),
    (("--color", "always"), {"NO_COLOR": "1"}, True),  # the flag wins
    ((), {"FORCE_COLOR": "1"}, True),
    (("--color", "never"), {"FORCE_COLOR": "1"}, False),
    ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
])
def test_colour(project: Path, args: tuple[str, ...], env: dict[str, str], coloured: bool) -> None:
    (project / "train.py").write_text(BUGGY)
    environ = {k: v for k, v in __import__("os").environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run([sys.executable, "-m", "loopcheck", "check", *args, "train.py"], cwd=project,
                          capture_output=True, text=True, env={**environ, **env}, timeout=120)
    assert ("\033[" in done.stdout) is coloured
    if coloured:  # the code is a terminal link to its page
        assert f"\033]8;;{PAGE}\033\\" in done.stdout


def test_colour_on_a_terminal(project: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    (project / "train.py").write_text(BUGGY)
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    from loopcheck.cli import main

    assert main(["check", "train.py"]) == 1
    assert "\033[1mtrain.py\033[0m" in terminal.getvalue()


def test_rules_as_json(run_cli) -> None:
    code, out, _ = run_cli("rules", "--output-format", "json")
    rows = json.loads(out)
    assert code == 0 and [r["code"] for r in rows][:3] == ["LC000", "LC001", "LC002"]
    assert {r["code"] for r in rows} >= set(CODES)
    lc101 = next(r for r in rows if r["code"] == "LC101")
    assert lc101 == {"code": "LC101", "name": "zero-grad-in-accumulation", "level": "error", "static": True,
                     "static_opt_in": False,
                     "runtime": True, "fix": True, "summary": CODES["LC101"].summary, "url": PAGE}
    assert "LC001 not-analysed" in " ".join(run_cli("rules")[1].split())
    assert run_cli("rule", "LC001")[1].startswith("# LC001 not-analysed")


def _stdin(project: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopcheck", "check", *args], cwd=project, input=source,
                          capture_output=True, text=True, timeout=120)


def test_standard_input_for_editors(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.loopcheck.per-file-ignores]\n"scripts/*.py" = ["LC101"]\n')
    done = _stdin(project, BUGGY, "--output-format", "concise", "--stdin-filename", "src/train.py")
    assert done.returncode == 1 and done.stdout.startswith("src/train.py:2:5: LC101 ")
    dash = _stdin(project, BUGGY, "--output-format", "json", "-")
    assert [f["filename"] for f in json.loads(dash.stdout)] == ["-"]
    ignored = _stdin(project, BUGGY, "--stdin-filename", "scripts/train.py")  # its per-file ignores apply
    assert ignored.returncode == 0 and ignored.stdout == "All checks passed! (1 file checked)\n"
    assert _stdin(project, CLEAN, "-").returncode == 0
    both = _stdin(project, BUGGY, "-", "train.py")
    assert both.returncode == 2 and "checked alone" in both.stderr


def test_standard_input_fix_and_diff(project: Path) -> None:
    fixed = _stdin(project, BUGGY, "--fix", "--stdin-filename", "train.py")
    assert fixed.returncode == 0 and fixed.stdout.splitlines()[-1] == "        optimizer.zero_grad()"
    assert fixed.stderr == "" and not (project / "train.py").exists()  # nothing written to disk
    diff = _stdin(project, BUGGY, "--diff", "-")
    assert diff.returncode == 1 and diff.stdout.startswith("--- a/-\n+++ b/-\n")
    assert _stdin(project, fixed.stdout, "--diff", "-").stdout == ""


def test_a_closed_pipe_is_not_a_traceback(project: Path) -> None:
    # more output than a pipe holds (64 KiB), so writing fails once `head` has gone
    (project / "train.py").write_text("".join(f"def train{i}():\n" + "".join(f"    {line}\n" for line in
                                                                            BUGGY.splitlines()) for i in range(400)))
    done = subprocess.run(f"{sys.executable} -m loopcheck check --no-cache train.py | head -1", shell=True,
                          cwd=project, capture_output=True, text=True, timeout=300)
    assert done.stdout.startswith("train.py:3:9: LC101") and done.stderr == ""
