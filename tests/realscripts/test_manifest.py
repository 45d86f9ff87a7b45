"""The real-script benchmark's manifest and verdicts (benchmarks/realscripts/): every injection's
diff exists, patches a file the program copies, and its expected line is a line the diff adds
or keeps (run.py checks its text in the patched file); the verdicts found / elsewhere / missed mean what run.py's table says."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

import pytest

HERE = Path(__file__).resolve().parents[2] / "benchmarks" / "realscripts"
MANIFEST = tomllib.loads((HERE / "manifest.toml").read_text())
INJECTIONS = [(p, i) for p in MANIFEST["program"] for i in p.get("injection", [])]


def _runner():
    spec = importlib.util.spec_from_file_location("realscripts_run", HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_at_least_eight_programs_and_forty_injections() -> None:
    assert len(MANIFEST["program"]) >= 8 and len(INJECTIONS) >= 40
    assert len({p["name"] for p in MANIFEST["program"]}) == len(MANIFEST["program"])
    for program in MANIFEST["program"]:
        assert re.fullmatch(r"[0-9a-f]{40}", program["commit"]) and "/" in program["repo"]


@pytest.mark.parametrize("program,injection", INJECTIONS, ids=[f"{p['name']}-{i['id']}" for p, i in INJECTIONS])
def test_injection_diff_targets_the_expected_line(program, injection) -> None:
    diff = (HERE / injection["diff"]).read_text()
    (expect,) = injection["expect"]
    assert diff.startswith(f"--- a/{expect['file']}\n+++ b/{expect['file']}\n")
    assert any(expect["file"] == f or expect["file"].startswith(f + "/") for f in program["files"])
    assert all(re.fullmatch(r"LC\d{3}", code) for code in expect["code"].split("|"))
    assert expect["text"]  # run.py checks that the patched file has it at that line


def test_verdicts() -> None:
    judge = _runner().judge
    expected = [{"code": "LC301|LC303", "file": "train.py", "line": 10}]
    finding = {"code": "LC303", "file": "train.py", "line": 10}
    assert judge({"report": {"findings": [finding]}}, expected) == {"verdicts": ["found"], "others": []}
    moved = dict(finding, line=12)
    assert judge({"report": {"findings": [moved]}}, expected) == {"verdicts": ["elsewhere"],
                                                                   "others": ["LC303 train.py:12"]}
    other = {"code": "LC105", "file": "lib.py", "line": 3}
    assert judge({"report": {"findings": [other]}}, expected) == {"verdicts": ["missed"],
                                                                   "others": ["LC105 lib.py:3"]}
    assert judge({"report": None}, []) == {"verdicts": [], "others": []}
