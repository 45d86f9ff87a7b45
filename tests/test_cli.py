"""`loopcheck check`, `rule`, `rules`: output, selection, exit codes and bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loopcheck import __version__
from loopcheck.catalog import CODES
from tests.conftest import BUGGY, CLEAN


def test_buggy_file_is_reported_with_position_and_source(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "train.py")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("train.py:2:5: LC101 [*] ")
    assert "    optimizer.zero_grad()" in out.splitlines()[1]
    assert out.splitlines()[2].strip() == "^" * len("optimizer.zero_grad()")
    assert "Found 1 problem in 1 file checked.\n[*] 1 fixable with `--fix`." in out


def test_fix_writes_the_file_and_reports_what_is_left(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "--fix", "train.py")
    assert code == 0
    assert out == "Fixed 1 problem. All checks passed! (1 file checked)\n"
    fixed = (project / "train.py").read_text()
    assert fixed.splitlines()[-1] == "        optimizer.zero_grad()"
    assert run_cli("check", "--fix", "train.py")[:2] == (0, "All checks passed! (1 file checked)\n")


def test_diff_prints_without_writing(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, err = run_cli("check", "--diff", "train.py")
    assert code == 1
    assert out.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "-    optimizer.zero_grad()\n" in out and "+        optimizer.zero_grad()\n" in out
    assert err == "Would fix 1 problem.\n"
    assert (project / "train.py").read_text() == BUGGY
    (project / "clean.py").write_text(CLEAN)
    assert run_cli("check", "--diff", "clean.py")[:2] == (0, "")


def test_fix_keeps_the_file_encoding(project: Path, run_cli) -> None:
    data = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUGGY.encode()
    (project / "train.py").write_bytes(data)
    assert run_cli("check", "--fix", "train.py")[0] == 0
    assert (project / "train.py").read_bytes().startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n")


def test_clean_file_passes(project: Path, run_cli) -> None:
    (project / "train.py").write_text(CLEAN)
    code, out, _ = run_cli("check")
    assert code == 0
    assert out == "All checks passed! (1 file checked)\n"


def test_json_output(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "--output-format", "json", "train.py")
    assert code == 1
    [finding] = json.loads(out)
    assert finding["code"] == "LC101"
    assert finding["name"] == "zero-grad-in-accumulation"
    assert finding["filename"] == "train.py"
    assert finding["location"] == {"row": 2, "column": 5}
    assert finding["end_location"] == {"row": 2, "column": 26}
    assert finding["severity"] == "error"
    assert finding["fix"] == {"message": "move the zeroing after the optimizer step", "applicability": "safe"}
    assert "zeroed on every micro-batch" in finding["message"]


@pytest.mark.parametrize("selector", ["LC101", "LC1", "zero-grad-in-accumulation", "ALL"])
def test_select_by_code_prefix_or_name(project: Path, run_cli, selector: str) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check", "--select", selector, "train.py")[0] == 1


@pytest.mark.parametrize("selector", ["LC101", "LC10", "zero-grad-in-accumulation"])
def test_ignore_by_code_prefix_or_name(project: Path, run_cli, selector: str) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check", "--ignore", selector, "train.py")[0] == 0


def test_select_other_family_finds_nothing(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check", "--select", "LC3", "train.py")[0] == 0


def test_unknown_selector_is_a_usage_error(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    code, _, err = run_cli("check", "--select", "LC999", "train.py")
    assert code == 2
    assert "unknown rule selector 'LC999'" in err
    code, _, err = run_cli("check", "--ignore", "LC1O1", "train.py")
    assert (code, err) == (2, "loopcheck: error: unknown rule selector 'LC1O1' (did you mean 'LC101'?)\n")
    assert "(did you mean 'LC605'?)" in run_cli("rule", "LC6O5")[2]


def test_opt_in_rule_needs_extend_select(project: Path, run_cli) -> None:
    from loopcheck.selection import resolve

    assert "LC110" not in resolve()
    assert "LC110" in resolve(None, (), ["LC110"])


LEAK = """\
import torch

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    model.eval()
    evaluate(model)
"""


BATCHNORM_DDP = """\
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
model = DDP(net)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("code", "source", "at"), [
    # the static reading cannot see most models' layers or the way back to train mode
    ("LC605", LEAK, "train.py:10:5: "),
    # whether the per-GPU batch is small is rarely in the file
    ("LC503", BATCHNORM_DDP, "train.py:6:9: "),
])
def test_a_rule_whose_static_check_is_opt_in_runs_in_check_only_when_selected(project: Path, run_cli, code: str,
                                                                              source: str, at: str) -> None:
    # the runtime check sees what the static reading cannot (the modules, the mode at each backward,
    # the per-GPU batch), so it keeps the rule on
    from loopcheck.selection import resolve

    (project / "train.py").write_text(source)
    status, out, _ = run_cli("check", "--no-cache", "train.py")
    assert (status, code in out) == (0, False)
    status, out, _ = run_cli("check", "--no-cache", "--extend-select", code, "train.py")
    assert status == 1 and f"{at}{code} " in out
    assert code not in resolve() and code in resolve(static=False)


def test_statistics_and_exit_zero(project: Path, run_cli) -> None:
    (project / "a.py").write_text(BUGGY)
    (project / "b.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "--statistics", "--exit-zero", "--no-show-source")
    assert code == 0
    assert "2\tLC101\tzero-grad-in-accumulation\t[*] 2 fixable" in out


def test_nonexistent_path_is_an_error(project: Path, run_cli) -> None:
    code, out, err = run_cli("check", "missing.py")
    assert code == 2
    assert err.strip() == "loopcheck: error: missing.py: no such file or directory"
    assert out == "No problems found (0 files checked; 1 path not found)\n"


def test_a_missing_path_does_not_stop_the_others(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "src").mkdir()
    (project / "src" / "loop.py").write_text(BUGGY)
    code, out, err = run_cli("check", "--no-show-source", "missing.py", "train.py", "gone/", "src")
    assert code == 2  # a path error wins over findings, as in ruff
    assert err.splitlines() == ["loopcheck: error: missing.py: no such file or directory",
                                "loopcheck: error: gone: no such file or directory"]
    assert "src/loop.py:2:5: LC101" in out and "train.py:2:5: LC101" in out and "Found 2 problems in 2 files checked; 2 paths not found." in out
    assert run_cli("check", "--exit-zero", "missing.py", "train.py")[0] == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_and_devices_are_skipped_not_read(project: Path) -> None:
    # Reading a FIFO blocks until a writer comes: in a subprocess with a time limit, so a
    # regression fails instead of hanging the suite.
    os.mkfifo(project / "x.py")
    if hasattr(socket, "AF_UNIX"):  # a socket named like a Python file
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(project / "sock.py"))
    (project / "train.py").write_text(BUGGY)
    done = subprocess.run([sys.executable, "-m", "loopcheck", "check", "--no-show-source", "."], cwd=project,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "train.py:2:5: LC101" in done.stdout and "x.py" not in done.stdout + done.stderr
    assert "sock.py" not in done.stdout + done.stderr
    assert "1 file checked" in done.stdout
    named = subprocess.run([sys.executable, "-m", "loopcheck", "check", "--no-show-source", "x.py", "/dev/null"],
                           cwd=project, capture_output=True, text=True, timeout=60)
    assert named.returncode == 0
    assert named.stderr.splitlines() == ["loopcheck: warning: x.py: not a regular file or directory, skipped",
                                         "loopcheck: warning: /dev/null: not a regular file or directory, skipped"]
    if hasattr(socket, "AF_UNIX"):
        listener.close()


_MANY_FINDINGS = "\n".join(["import torch", *(f"scaler{i} = torch.cuda.amp.GradScaler()" for i in range(600)),
                              "for x in loader:", "    loss = model(x)", "    loss.backward()", "    opt.step()\n"])


def test_the_command_exits_with_its_code_and_all_of_its_output(project: Path, run_cli) -> None:
    # The command line skips Python's teardown after a check: what is written must still all come out.
    (project / "train.py").write_text(BUGGY)
    _, expected, _ = run_cli("check", "--no-cache", "--output-format", "json", "train.py")
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    with open(project / "out.json", "w") as out:  # a file: a short report stays in stdout's buffer
        done = subprocess.run([sys.executable, "-m", "loopcheck", "check", "--no-cache", "--output-format", "json",
                               "train.py"], cwd=project, env=buffered, stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert done.returncode == 1, done.stderr
    assert json.loads((project / "out.json").read_text()) == json.loads(expected) != []


def test_a_reader_that_leaves_early_ends_the_check_quietly(project: Path) -> None:
    (project / "train.py").write_text(_MANY_FINDINGS)  # ~190 kB of report: more than a pipe holds
    check = subprocess.Popen([sys.executable, "-m", "loopcheck", "check", "--no-cache", "train.py"], cwd=project,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert check.stdout is not None and check.stderr is not None
    assert check.stdout.readline().startswith(b"train.py:2:")
    check.stdout.close()  # `loopcheck check | head -1`
    assert check.wait(timeout=120) == 128 + 13
    assert check.stderr.read() == b""  # no traceback


def test_syntax_error_is_reported_and_other_files_still_checked(project: Path, run_cli) -> None:
    (project / "broken.py").write_text("for x in loader\n    loss.backward()\n")
    (project / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("broken.py:1:") and " LC000 syntax error" in lines[0]
    assert lines[1].startswith("train.py:2:5: LC101")


def test_which_files_are_parsed_is_what_the_readme_says(project: Path, run_cli) -> None:
    """README, "Which files are parsed": a file is parsed when it mentions a training loop's call
    (`backward(`, `loss_scaler(`, `self.training_step(`, a call handed the optimizer), a Lightning hook's
    `optimizer_step(` (LC109) or the
    deprecated AMP API (`cuda.amp`, `torch.cuda import`), so a syntax error there is LC000; a file that mentions
    none of them is not parsed."""
    from loopcheck.engine import text_tests
    from loopcheck.screen import TRAINING_LOOP_TEXT
    from loopcheck.selection import resolve

    assert TRAINING_LOOP_TEXT == ("backward(", "loss_scaler(", "training_step(", "optimizer")
    for test in text_tests(resolve()):
        assert test.training_loop or set(test.any_of) <= {"cuda.amp", "torch.cuda import"}, test
        assert set(test.without_loop) <= {"optimizer_step("}, test
    mentions = {"bw.py": "loss.backward()", "scaler.py": "loss_scaler(loss, optimizer)",
                "step.py": "tr_loss += self.training_step(model, inputs)",
                "hook.py": "super().optimizer_step(epoch, batch_idx, optimizer, optimizer_closure)",
                "amp.py": "torch.cuda.amp.autocast()", "imp.py": "from torch.cuda import amp",
                "helper.py": "engine.step(model=model, optimizer=optimizer, loss=loss)",
                "other.py": "optimizer.step()  # zero_grad( GradScaler( autocast("}
    for name, text in mentions.items():
        (project / name).write_text(f"for x in loader\n    {text}\n")
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert sorted(line.split(":")[0] for line in out.splitlines() if " LC000 syntax error" in line) == [
        "amp.py", "bw.py", "helper.py", "hook.py", "imp.py", "scaler.py", "step.py"]
    assert "other.py" not in out and "8 files checked" in out


def test_run_without_torch_installed_says_so_in_one_line(project: Path) -> None:
    """`loopcheck run` where torch cannot be imported (``python -S`` hides site-packages): the
    script's own ImportError, then one line from loopcheck, no traceback of loopcheck's."""
    (project / "train.py").write_text("import torch\n")
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from loopcheck.cli import main; sys.exit(main(sys.argv[2:]))", root, "run", "train.py"],
                          cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[-2:] == ["ModuleNotFoundError: No module named 'torch'",
                          "loopcheck: nothing to check: torch is not installed"]
    assert "loopcheck/" not in done.stderr  # the traceback is the script's alone


def test_undecodable_empty_and_non_python_input(project: Path, run_cli) -> None:
    (project / "latin.py").write_bytes(b"# caf\xe9\nloss.backward()\n")
    (project / "empty.py").write_text("")
    (project / "notes.txt").write_text(BUGGY)
    (project / "data").mkdir()
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert out.splitlines()[0].startswith("latin.py:1:1: LC000 cannot decode file")
    assert "2 files checked" in out
    assert run_cli("check", "data")[:2] == (0, "All checks passed! (0 files checked)\n")


def test_encoding_cookie_is_honoured(project: Path, run_cli) -> None:
    (project / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUGGY.encode())
    code, out, _ = run_cli("check", "--no-show-source", "latin.py")
    assert code == 1 and "latin.py:4:5: LC101" in out


def test_codec_registered_at_run_time_reads_as_utf8(project: Path, run_cli) -> None:
    # future-fstrings registers its codec when installed; the source under the cookie is UTF-8
    (project / "ok.py").write_bytes(b"# -*- coding: future_fstrings -*-\n# caf\xc3\xa9\n" + BUGGY.encode())
    (project / "bad.py").write_bytes(b"# -*- coding: future_fstrings -*-\n# caf\xe9\n" + BUGGY.encode())
    code, out, _ = run_cli("check", "--no-show-source", "ok.py", "bad.py")
    assert code == 1 and "ok.py:4:5: LC101" in out
    assert "bad.py:1:1: LC000 cannot decode file: unknown encoding: future_fstrings" in out


def test_symlink_loop_terminates(project: Path, run_cli) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "train.py").write_text(BUGGY)
    os.symlink(project / "pkg", project / "pkg" / "loop")
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert out.count("LC101") == 1


def test_gitignore_and_default_excludes_are_respected(project: Path, run_cli) -> None:
    (project / ".gitignore").write_text("generated/\n")
    # (Jupyter's autosave copies of a notebook's scripts sit in .ipynb_checkpoints, as ruff assumes too)
    for folder in ("generated", ".venv", ".ipynb_checkpoints", "src"):
        (project / folder).mkdir()
        (project / folder / "train.py").write_text(BUGGY)
    code, out, _ = run_cli("check", "--no-show-source")
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines() if "LC101" in line] == ["src/train.py"]


def test_checked_code_is_never_executed(project: Path, run_cli) -> None:
    marker = project / "executed"
    (project / "train.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + BUGGY)
    run_cli("check", "train.py")
    assert not marker.exists()


def test_rule_documentation_by_code_and_name(run_cli) -> None:
    code, out, _ = run_cli("rule", "LC101")
    assert code == 0
    assert out.startswith("# LC101 zero-grad-in-accumulation")
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:"):
        assert section in out
    assert run_cli("rule", "zero-grad-in-accumulation")[1] == out
    assert run_cli("rule", "LC999")[0] == 2


def test_rules_lists_every_code(run_cli) -> None:
    code, out, _ = run_cli("rules")
    assert code == 0
    for c, info in CODES.items():
        assert f"{c} {info.name}" in " ".join(out.split())
    # a rule whose static check is opt-in says so where `check` would leave it out
    assert "LC605 eval-mode-leak error opt-in yes yes" in " ".join(out.split())
    rows = {row["code"]: row for row in json.loads(run_cli("rules", "--output-format", "json")[1])}
    assert rows["LC605"]["static_opt_in"] and not rows["LC101"]["static_opt_in"]


def test_console_script_version_and_help() -> None:
    version = subprocess.run([sys.executable, "-m", "loopcheck", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"loopcheck {__version__}"
    helptext = subprocess.run([sys.executable, "-m", "loopcheck", "check", "--help"], capture_output=True, text=True)
    assert helptext.returncode == 0
    assert "exit status: 0 no findings, 1 findings, 2" in helptext.stdout
    assert "# noqa: LC101" in helptext.stdout


def test_a_path_or_a_misspelt_command_says_what_to_type(run_cli) -> None:
    code, out, err = run_cli("train.py", "--lr", "3")
    assert (code, out) == (2, "")
    assert err == ("loopcheck: error: 'train.py' is not a command: `loopcheck check train.py` checks it without "
                   "running it, `loopcheck run train.py` runs it under the runtime checker\n")
    code, _, err = run_cli("chek", "train.py")
    assert code == 2 and err.startswith("loopcheck: error: unknown command 'chek' (did you mean 'check'?)")
    assert run_cli("frobnicate")[2] == "loopcheck: error: unknown command 'frobnicate' (commands: check, run, " \
                                       "report, rule, rules)\n"
    assert run_cli("src/")[2] == "loopcheck: error: 'src/' is not a command: `loopcheck check src/` checks the " \
                                 "files in it\n"


def test_linting_never_imports_torch(project: Path) -> None:
    (project / "train.py").write_text("import torch\n" + BUGGY)
    script = ("import sys; from loopcheck.cli import main; code = main(['check', 'train.py']); "
              "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=project)
    assert result.returncode == 1, result.stderr
    assert "LC101" in result.stdout
