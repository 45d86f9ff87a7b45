"""The result cache (keys, skipping parsing, bad entries, unusable directories, concurrent runs),
`--jobs` and the progress bar."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loopcheck import cache as cache_module
from loopcheck import checker, progress
from loopcheck.cache import FORMAT_VERSION, Cache, default_directory
from loopcheck.config import LrScaling, Options
from tests.conftest import BUGGY, CLEAN

ROOT = Path(__file__).resolve().parents[1]


def _entries() -> list[Path]:
    return sorted((default_directory() / f"v{FORMAT_VERSION}").glob("*/[0-9a-f]*.json"))


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(job: object) -> None:
        raise AssertionError("a cached file was checked again")

    monkeypatch.setattr(checker, "_check_job", fail)


def test_second_run_reads_the_cache_without_parsing(project: Path, run_cli, monkeypatch) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "clean.py").write_text(CLEAN)
    first = run_cli("check")
    assert first[0] == 1 and len(_entries()) == 2
    _no_parsing(monkeypatch)
    assert run_cli("check") == first
    assert run_cli("check", "--output-format", "sarif")[0] == 1


def test_warm_run_imports_neither_libcst_nor_the_rules(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    run_cli("check")
    probe = ("import sys; from loopcheck.cli import main; code = main(['check', '-q']); "
             "print(code, 'libcst' in sys.modules, 'loopcheck.rules' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.splitlines()[-1] == "1 False False"


def test_edits_suppressions_and_configuration_are_part_of_the_key(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check")[0] == 1
    (project / "train.py").write_text(BUGGY.replace("optimizer.zero_grad()", "optimizer.zero_grad()  # noqa: LC101"))
    assert run_cli("check")[0] == 0
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check")[0] == 1
    assert run_cli("check", "--ignore", "LC101")[0] == 0
    (project / "pyproject.toml").write_text('[tool.loopcheck.per-file-ignores]\n"train.py" = ["LC101"]\n')
    assert run_cli("check")[0] == 0


def test_options_and_loopcheck_itself_are_part_of_the_key(tmp_path: Path, monkeypatch) -> None:
    plain = Cache(tmp_path)
    scaled = Cache(tmp_path, Options(lr_scaling=LrScaling(256, 0.1)))
    assert plain.key("a.py", ["LC101"], "x") != scaled.key("a.py", ["LC101"], "x")
    assert plain.key("a.py", ["LC101"], "x") != plain.key("a.py", ["LC101", "LC102"], "x")
    monkeypatch.setattr(cache_module, "__version__", "99.0")
    assert Cache(tmp_path).key("a.py", ["LC101"], "x") != plain.key("a.py", ["LC101"], "x")


def test_no_cache_neither_reads_nor_writes(project: Path, run_cli) -> None:
    (project / "train.py").write_text(BUGGY)
    assert run_cli("check", "--no-cache")[0] == 1
    assert _entries() == []


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff garbage", b"[1, 2, 3]", b'{"loopcheck-cache": 1}',
                                     b'{"loopcheck-cache": 1, "key": "KEY", "value": [{"line": "x"}]}',
                                     b'{"loopcheck-cache": 1, "key": "KEY", "value": 7}',
                                     b"[" * 100_000 + b"]" * 100_000])
def test_corrupt_or_foreign_entries_are_misses(project: Path, run_cli, garbage: bytes) -> None:
    (project / "train.py").write_text(BUGGY)
    expected = run_cli("check")
    for entry in _entries():
        entry.write_bytes(garbage.replace(b"KEY", entry.stem.encode()))
    assert run_cli("check") == expected
    assert json.loads(_entries()[0].read_bytes())["key"] == _entries()[0].stem  # written again


def test_an_unusable_cache_directory_disables_the_cache(project: Path, run_cli, monkeypatch) -> None:
    (project / "train.py").write_text(BUGGY)
    (project / "a-file").write_text("")
    monkeypatch.setenv("LOOPCHECK_CACHE_DIR", str(project / "a-file" / "cache"))  # cannot be created
    code, _, err = run_cli("check")
    assert (code, err) == (1, "")


def test_a_read_only_cache_directory_disables_the_cache(project: Path, run_cli, monkeypatch) -> None:
    (project / "train.py").write_text(BUGGY)
    expected = run_cli("check", "--no-cache")

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # the cache imports it where it writes
    assert run_cli("check") == expected
    assert _entries() == []


def test_concurrent_runs_share_the_cache(project: Path) -> None:
    for i in range(4):
        (project / f"train{i}.py").write_text(BUGGY + f"# {i}\n")
    command = [sys.executable, "-m", "loopcheck", "check", "--output-format", "json"]
    runs = [subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [1, 1, 1]
    assert len({*outputs}) == 1 and len(json.loads(outputs[0])) == 4
    names = [p.name for p in (default_directory() / f"v{FORMAT_VERSION}").glob("*/*")]
    assert not [n for n in names if n.startswith(".tmp-")]
    assert len(_entries()) == 4
    again = subprocess.run(command, cwd=project, stdout=subprocess.PIPE, text=True, timeout=120, check=False)
    assert again.stdout == outputs[0]


def test_entries_of_old_builds_are_pruned(tmp_path: Path, monkeypatch) -> None:
    builds = tmp_path / f"v{FORMAT_VERSION}"
    for i in range(7):
        old = builds / f"build{i}"
        old.mkdir(parents=True)
        (old / "entry.json").write_text("{}")
        os.utime(old, (1000.0 + i, 1000.0 + i))  # long untouched, build6 the most recent
    (builds / "recent").mkdir()  # in use by a concurrent run of another build
    cache = Cache(tmp_path)
    assert cache.enabled
    kept = sorted(p.name for p in builds.iterdir())
    assert kept == sorted(["build4", "build5", "build6", "recent", cache.directory.name])  # the 4 most recent
    monkeypatch.setattr(cache_module, "_KEEP_BUILDS", 0)
    cache.directory.rmdir()
    Cache(tmp_path)
    assert sorted(p.name for p in builds.iterdir()) == sorted(["recent", cache.directory.name])


def test_cache_directory_location(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOOPCHECK_CACHE_DIR", str(tmp_path / "explicit"))
    assert default_directory() == tmp_path / "explicit"
    monkeypatch.delenv("LOOPCHECK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "loopcheck"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == tmp_path / "home" / ".cache" / "loopcheck"


def test_parallel_output_is_deterministic_and_equals_serial(project: Path, run_cli) -> None:
    for i in range(18):
        (project / f"train{i:02}.py").write_text(BUGGY if i % 3 else CLEAN)
    serial = run_cli("check", "--no-cache", "--jobs", "1", "--output-format", "json")
    assert serial[0] == 1
    assert run_cli("check", "--no-cache", "--jobs", "2", "--output-format", "json") == serial
    assert run_cli("check", "--jobs", "0")[::2] == (2, "loopcheck: error: --jobs must be at least 1, not 0\n")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_only_for_long_runs(monkeypatch) -> None:
    pipe, terminal = io.StringIO(), _Terminal()
    for stream in (pipe, terminal):
        bar = progress.Progress(10, stream=stream)
        for _ in range(10):
            bar.tick()
        bar.done()
    assert pipe.getvalue() == terminal.getvalue() == ""  # short run: nothing
    monkeypatch.setattr(progress, "_DELAY_S", 0.0)
    monkeypatch.setattr(progress, "_EVERY_S", 0.0)
    for stream in (pipe, terminal):
        bar = progress.Progress(4, stream=stream)
        for _ in range(4):
            bar.tick()
        bar.done()
    assert pipe.getvalue() == ""
    assert "] 4/4 files" in terminal.getvalue() and terminal.getvalue().endswith("\r\033[K")
