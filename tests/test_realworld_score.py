"""benchmarks/realworld/score.py: one table per split, held-out splits kept out of --details."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCORE = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld" / "score.py"


@pytest.fixture(scope="module")
def score():
    spec = importlib.util.spec_from_file_location("realworld_score", SCORE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's string annotations through it
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def write_manifest(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return path


def entry(loop_id: str, split: str, expected: list[str], repo: str = "owner/name") -> dict:
    return {
        "id": loop_id, "repo": repo, "commit": "0" * 40, "path": "train.py", "lines": [1, 50],
        "expected": expected, "reasons": {code: "why" for code in expected}, "notes": "", "split": split,
    }


def found(code: str, row: int) -> dict:
    return {"code": code, "message": f"{code} here", "location": {"row": row}, "filename": "train.py"}


def test_each_split_gets_its_own_table_and_all_counts_every_loop(score, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [
        entry("rw1", "dev", ["LC101"]),
        entry("rw2", "test", ["LC105"], repo="a/b"),
        entry("rw3", "test2", ["LC501"], repo="c/d"),
        entry("rw4", "test2", [], repo="e/f"),
        entry("rw5", "test3", ["LC201"], repo="g/h"),
    ])
    loops = score.load_manifest(manifest)
    loops[0].reported["LC101"].append(found("LC101", 10))  # dev: TP
    loops[2].reported["LC501"].append(found("LC501", 10))  # test2: TP
    loops[3].reported["LC302"].append(found("LC302", 10))  # test2: FP
    loops[4].reported["LC201"].append(found("LC201", 10))  # test3: TP
    report, raw = score.tables(loops)
    assert list(raw) == ["dev", "test", "test2", "test3", "all"]
    assert raw["test2"]["overall"] == {"TP": 1, "FP": 1}
    assert raw["test3"]["overall"] == {"TP": 1}
    assert raw["test"]["overall"] == {"FN": 1}
    assert raw["all"]["overall"] == {"TP": 3, "FN": 1, "FP": 1}
    assert "### test2: 2 loops, 2 repositories, 1 expected findings" in report
    assert "### test3: 1 loops, 1 repositories, 1 expected findings" in report
    assert "### all: 5 loops, 5 repositories, 4 expected findings" in report


def test_details_list_only_the_requested_splits(score, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [
        entry("rw1", "dev", ["LC101"]),
        entry("rw2", "test2", ["LC501"], repo="c/d"),
    ])
    loops = score.load_manifest(manifest)
    dev_only = score.details(loops, [], [], {"dev"})
    assert "rw1 LC101" in dev_only and "rw2" not in dev_only and "c/d" not in dev_only
    both = score.details(loops, [], [], {"dev", "test2"})
    assert "rw2 LC501" in both


def test_details_default_to_the_readable_splits_and_name_no_held_out_checkout(score, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [
        entry("rw1", "dev", ["LC101"]),
        entry("rw4", "dev2", ["LC303"], repo="second/dev"),
        entry("rw5", "dev3", ["LC302"], repo="readable/three"),
        entry("rw2", "test2", ["LC501"], repo="held/out"),
        entry("rw3", "test3", ["LC105"], repo="third/split"),
    ])
    details = tmp_path / "details.md"
    corpus = tmp_path / "corpus"  # empty: every checkout is missing, so each is an error
    corpus.mkdir()
    code = score.main(["--corpus", str(corpus), "--manifest", str(manifest), "--details", str(details)])
    text = details.read_text()
    assert code == 2
    assert "rw1 LC101" in text and "owner+name@" in text
    assert "rw4 LC303" in text and "second+dev@" in text
    assert "rw5 LC302" in text and "readable+three@" in text
    assert "rw2" not in text and "held" not in text
    assert "rw3" not in text and "third" not in text


def test_a_split_outside_the_known_ones_is_reported_after_them(score, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [
        entry("rw1", "extra", []), entry("rw2", "dev", []), entry("rw3", "test3", [], repo="a/b"),
    ])
    _, raw = score.tables(score.load_manifest(manifest))
    assert list(raw) == ["dev", "test3", "extra", "all"]
