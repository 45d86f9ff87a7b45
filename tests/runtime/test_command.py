"""``loopcheck run`` behaves like ``python SCRIPT ARGS``: same argv, __main__, sys.path[0],
working directory, exit codes and tracebacks, plus a summary and an atomic report."""
from __future__ import annotations

import json
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import ROOT, loopcheck_run, python, run

PROBE = textwrap.dedent("""\
    import json, os, sys
    print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                      "cwd": os.getcwd(), "file": __file__,
                      "main": sys.modules["__main__"].__dict__.get("MARK")}))
""")
TRAIN = textwrap.dedent("""\
    import sys
    import torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(4):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        opt.step()
    {tail}
""")


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_script_sees_what_python_gives_it(tmp_path: Path) -> None:
    _write(tmp_path, "scripts/probe.py", "MARK = 'main module'\n" + PROBE)
    # the script's options are its own, even where they look like (or abbreviate) loopcheck's
    args = ["scripts/probe.py", "a", "--lr", "3", "--output", "out", "--report", "r.json", "-q"]
    plain = python(args, tmp_path)
    checked = loopcheck_run(args, tmp_path)
    assert checked.returncode == plain.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == json.loads(plain.stdout)
    assert checked.stderr == "loopcheck: nothing to check: the script never imported torch\n"


def test_module_mode_matches_python_dash_m(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/train.py", PROBE)
    plain = python(["-m", "pkg.train", "x", "-y"], tmp_path)
    checked = loopcheck_run(["-m", "pkg.train", "x", "-y"], tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == json.loads(plain.stdout)


@pytest.mark.parametrize("tail, code", [("sys.exit(3)", 3), ("sys.exit('bad config')", 1),
                                        ("sys.exit()", 0), ("raise ValueError('boom')", 1)])
def test_exit_codes_and_tracebacks_are_the_scripts(tmp_path: Path, tail: str, code: int) -> None:
    # torch only where the findings are checked too: each torch import costs seconds
    with_torch = tail.startswith("raise")
    _write(tmp_path, "train.py", TRAIN.format(tail=tail) if with_torch else f"import sys\n{tail}\n")
    plain = python(["train.py"], tmp_path)
    checked = loopcheck_run(["--report", "out/report.json", "train.py"], tmp_path)
    assert plain.returncode == checked.returncode == code
    # Python's own output (traceback or exit message) comes first, unchanged
    assert checked.stderr.startswith(plain.stderr), checked.stderr
    if with_torch:
        report = json.loads((tmp_path / "out/report.json").read_text())
        assert report["exit"]["code"] == code
        assert [f["code"] for f in report["findings"]] == ["LC109"]
        assert re.search(r"^train\.py:\d+:\d+: LC109 ", checked.stderr, re.M), checked.stderr
    else:  # nothing was checked: no report
        assert not (tmp_path / "out/report.json").exists()


def test_fail_on_turns_only_a_successful_run_into_failure(tmp_path: Path) -> None:
    _write(tmp_path, "buggy.py", TRAIN.format(tail=""))
    _write(tmp_path, "crash.py", TRAIN.format(tail="sys.exit(4)"))
    assert loopcheck_run(["--fail-on", "warning", "buggy.py"], tmp_path).returncode == 1
    assert loopcheck_run(["--fail-on", "error", "--ignore", "double-step", "buggy.py"],
                         tmp_path).returncode == 0
    assert loopcheck_run(["--fail-on", "error", "crash.py"], tmp_path).returncode == 4


def test_select_and_quiet(tmp_path: Path) -> None:
    _write(tmp_path, "buggy.py", TRAIN.format(tail=""))
    quiet = loopcheck_run(["--quiet", "--select", "LC2", "buggy.py"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = loopcheck_run(["--quiet", "--select", "LC1", "buggy.py"], tmp_path)
    assert "LC109" in loud.stderr and "backward passes per step" not in loud.stderr
    bad = loopcheck_run(["--select", "LC999x", "buggy.py"], tmp_path)
    assert bad.returncode == 2 and "unknown rule selector" in bad.stderr


def test_sigterm_writes_the_report_then_dies_by_the_signal(tmp_path: Path) -> None:
    _write(tmp_path, "train.py", TRAIN.format(tail="import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    plain = python(["train.py"], tmp_path)
    checked = loopcheck_run(["--report", "r.json", "train.py"], tmp_path)
    assert plain.returncode == checked.returncode == -signal.SIGTERM
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit"]["how"] == "SIGTERM"
    assert [f["code"] for f in report["findings"]] == ["LC109"]


def test_keyboard_interrupt_ends_the_run_as_interrupted(tmp_path: Path) -> None:
    """An uncaught KeyboardInterrupt prints its traceback, writes the outputs, then the process
    dies by SIGINT, as CPython 3.11 does (a Python 3.12 build on the GPU machine exited with 1
    for a KeyboardInterrupt raised by code, so this is not compared with plain python)."""
    _write(tmp_path, "train.py", TRAIN.format(tail="raise KeyboardInterrupt"))
    checked = loopcheck_run(["--report", "r.json", "train.py"], tmp_path)
    assert checked.returncode == -signal.SIGINT
    assert "raise KeyboardInterrupt\nKeyboardInterrupt\n" in checked.stderr
    assert checked.stderr.index("KeyboardInterrupt") < checked.stderr.index("loopcheck: 1 finding")
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit"]["how"] == "KeyboardInterrupt"
    assert [f["code"] for f in report["findings"]] == ["LC109"]


def test_report_is_replaced_atomically_and_complete(tmp_path: Path) -> None:
    _write(tmp_path, "train.py", TRAIN.format(tail=""))
    (tmp_path / "out").mkdir()
    (tmp_path / "out/r.json").write_text("stale, not json")
    assert loopcheck_run(["--report", "out/r.json", "train.py"], tmp_path).returncode == 0
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["r.json"]
    report = json.loads((tmp_path / "out/r.json").read_text())
    assert set(report) >= {"findings", "counters", "memory", "optimizers", "environment"}
    assert report["counters"]["optimizer_steps"] == 8
    assert report["counters"]["backward_per_step"] == {"0": 4, "1": 4}
    assert report["optimizers"][0]["type"] == "SGD"
    assert report["environment"]["world_size"] == 1
    # a short run has memory at every step boundary (the resident set on a CPU)
    assert [s["step"] for s in report["memory"]["per_step"]] == list(range(1, 9))
    assert report["series"]["memory_bytes"] == [s["bytes"] for s in report["memory"]["per_step"]]


def test_missing_script_or_module(tmp_path: Path) -> None:
    result = loopcheck_run(["nope.py"], tmp_path)
    assert result.returncode == 2 and "nope.py" in result.stderr
    plain = python(["-m", "nosuchmodule"], tmp_path)
    checked = loopcheck_run(["-m", "nosuchmodule"], tmp_path)
    assert checked.returncode == plain.returncode == 1
    assert checked.stderr == plain.stderr


def test_a_script_without_torch_runs_as_plain_python(tmp_path: Path) -> None:
    """loopcheck never imports torch itself: the session starts when the script imports it."""
    _write(tmp_path, "tool.py", "import sys\nprint('torch' in sys.modules, sys.argv[1:])\n"
                                "print('to stderr', file=sys.stderr)\nsys.exit(5)\n")
    plain = python(["tool.py", "x"], tmp_path)
    checked = loopcheck_run(["--report", "r.json", "tool.py", "x"], tmp_path)
    assert checked.returncode == plain.returncode == 5
    assert checked.stdout == plain.stdout == "False ['x']\n"
    assert checked.stderr == plain.stderr + "loopcheck: nothing to check: the script never imported " \
                                            "torch; no report written\n"
    quiet = loopcheck_run(["-q", "tool.py", "x"], tmp_path)
    assert quiet.stderr == plain.stderr


def test_without_torch_installed_one_line_and_the_scripts_own_error(tmp_path: Path) -> None:
    """``python -S`` hides site-packages, so torch cannot be found (loopcheck comes from the
    checkout): the script's ImportError is its own, loopcheck adds one line."""
    _write(tmp_path, "train.py", "import torch\n")
    plain = run([sys.executable, "-S", "train.py"], tmp_path)
    checked = run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                   "from loopcheck.runtime.command import main; sys.exit(main(sys.argv[2:]))",
                   str(ROOT), "train.py"], tmp_path)
    assert "No module named 'torch'" in plain.stderr
    assert checked.returncode == plain.returncode == 1
    assert checked.stderr == plain.stderr + "loopcheck: nothing to check: torch is not installed\n"


def test_session_starts_when_the_script_imports_torch(tmp_path: Path) -> None:
    """Code before ``import torch`` runs without torch; what comes after is checked, including
    a function imported by name right after torch."""
    _write(tmp_path, "train.py", "import sys\nassert 'torch' not in sys.modules\n"
                                 "from torch.nn.utils import clip_grad_norm_\n"
                                 + TRAIN.format(tail="clip_grad_norm_(model.parameters(), 1.0)"))
    checked = loopcheck_run(["--report", "r.json", "train.py"], tmp_path)
    assert checked.returncode == 0, checked.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [f["code"] for f in report["findings"]] == ["LC109"]
    assert report["counters"]["clip_calls"] == 1
