"""One file never stops the run: pathological input, parser crashes, hangs and loopcheck's own bugs
give that file an LC001 notice (or LC000 for real syntax errors) and the other files are checked."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from loopcheck import checker, workers
from loopcheck.engine import check_source
from tests.conftest import BUGGY

LOOP = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n"
needs_fork = pytest.mark.skipif(not workers.can_isolate(), reason="process isolation needs fork")


@pytest.fixture(autouse=True)
def _short_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # A regression that hands a pathological file to libcst again must fail fast, not hang.
    monkeypatch.setattr(checker, "FILE_TIME_LIMIT_S", 20.0)


def test_pathological_files_from_real_bug_reports(project: Path, run_cli) -> None:
    (project / "nested.py").write_text(LOOP + "x = " + "(" * 1000 + "1" + ")" * 1000 + "\n")
    (project / "chain.py").write_text(LOOP + "y = a" + "".join(f".m{i}()" for i in range(3000)) + "\n")
    (project / "sum8k.py").write_text(LOOP + "z = " + " + ".join(["1"] * 8000) + "\n")
    (project / "sum20k.py").write_text(LOOP + "z = " + " + ".join(["1"] * 20000) + "\n")
    (project / "train.py").write_text(BUGGY)
    started = time.monotonic()
    code, out, err = run_cli("check", "--no-show-source")
    assert time.monotonic() - started < 20  # libcst hangs on two of these: it never sees them
    assert code == 1 and err == ""
    lines = out.splitlines()
    # CPython itself refuses 1,000 nested parentheses: a real syntax error
    assert "nested.py:6:" in out and "LC000 syntax error: too many nested parentheses" in out
    for name in ("chain.py", "sum8k.py", "sum20k.py"):  # CPython's compiler gives up too: not analysed
        (line,) = [x for x in lines if x.startswith(f"{name}:")]
        assert line.startswith(f"{name}:1:1: LC001 not analysed: too deeply nested for Python's own parser")
    assert any(x.startswith("train.py:2:5: LC101") for x in lines)
    assert lines[-2] == "Found 2 problems in 5 files checked; 3 not analysed (LC001)."


MIXED_INDENTATION = ("def train(loader):\n\t for x in loader:\n\t\t loss = model(x)\n\t\t loss.backward()\n"
                     "\t\t optimizer.step()\n")


def test_valid_python_that_libcst_cannot_parse_is_checked_from_pythons_own_tree(project: Path, run_cli) -> None:
    # one tab and one space, then two tabs and one space: valid Python (LibCST issue 829)
    (project / "mixed.py").write_text(MIXED_INDENTATION)
    code, out, _ = run_cli("check", "--no-show-source", "--no-cache", "mixed.py")
    assert code == 1
    assert out.splitlines() == [
        "mixed.py:5:4: LC103 `optimizer` steps but its gradients are never cleared in this loop: each step adds up "
        "the gradients of all previous ones",
        "Found 1 problem in 1 file checked."]


def test_fix_of_a_file_libcst_cannot_parse_keeps_its_findings_and_says_why_it_is_not_fixed(
        project: Path, run_cli) -> None:
    source = "import torch\n" + MIXED_INDENTATION.replace("\t\t loss = model(x)\n",
                                                           "\t\t with torch.cuda.amp.autocast():\n\t\t\t loss = model(x)\n")
    (project / "mixed.py").write_text(source)
    code, out, err = run_cli("check", "--no-show-source", "--fix", "mixed.py")
    assert code == 1
    assert (project / "mixed.py").read_text() == source
    assert [line.split(" ", 2)[:2] for line in out.splitlines()[:3]] == [
        ["mixed.py:4:9:", "LC205"], ["mixed.py:4:9:", "LC206"], ["mixed.py:7:4:", "LC103"]]
    assert err.splitlines()[0] == ("mixed.py:4:9: LC206 fix not applied: libcst cannot parse it although Python can "
                                   "(tokenizer error: no matching outer block for dedent)")
    # the cache keeps what the fix run found, not a clean file
    assert run_cli("check", "--no-show-source", "mixed.py")[1] == out


def test_recursion_in_the_analysis_is_contained_in_process() -> None:
    # libcst parses this (CPython does not: 1,000 nested parentheses), check_source must not raise
    findings = check_source(LOOP + "x = " + "(" * 1000 + "1" + ")" * 1000 + "\n")
    assert [f.code for f in findings] == ["LC000"]


_CHECK_JOB = checker._check_job


def _misbehave(job: tuple) -> list:
    name = job[1]
    if name == "crash.py":
        os.kill(os.getpid(), signal.SIGSEGV)  # what a segfault in libcst's native parser does
    if name == "hang.py":
        time.sleep(60)
    if name == "bug.py":
        raise RecursionError("maximum recursion depth exceeded")
    return _CHECK_JOB(job)


@needs_fork
def test_a_crash_a_hang_and_a_bug_each_stop_only_their_own_file(project: Path, run_cli,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checker, "_check_job", _misbehave)
    monkeypatch.setattr(checker, "FILE_TIME_LIMIT_S", 2.0)
    for name in ("crash.py", "hang.py", "bug.py", "a.py", "z.py"):
        (project / name).write_text(BUGGY)
    for jobs in ("1", "2"):
        code, out, err = run_cli("check", "--no-show-source", "--no-cache", "--jobs", jobs)
        assert code == 1 and err == ""
        lines = out.splitlines()
        assert "crash.py:1:1: LC001 not analysed: the checking process crashed (SIGSEGV)" in lines
        assert "hang.py:1:1: LC001 not analysed: took longer than 2 s (stopped)" in lines
        assert ("bug.py:1:1: LC001 not analysed: loopcheck failed on it (RecursionError: maximum recursion depth "
                "exceeded)") in lines
        assert any(x.startswith("a.py:2:5: LC101") for x in lines) and any(x.startswith("z.py:2:5: LC101")
                                                                           for x in lines)
        assert lines[-2] == "Found 2 problems in 5 files checked; 3 not analysed (LC001)."


@needs_fork
def test_failures_are_not_cached(project: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "bug.py").write_text(BUGGY)
    monkeypatch.setattr(checker, "_check_job", _misbehave)
    assert "LC001" in run_cli("check")[1]
    monkeypatch.setattr(checker, "_check_job", _CHECK_JOB)
    assert "bug.py:2:5: LC101" in run_cli("check")[1]  # checked again, not served from the cache


def _job(n: int) -> int:
    if n == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if n == 2:
        time.sleep(30)
    if n == 3:
        raise ValueError("bad input\nsecond line")
    return n * 10


@needs_fork
def test_workers_contain_each_failure_and_finish_the_rest() -> None:
    results = dict(workers.run(_job, [0, 1, 2, 3, 4, 5], workers=2, time_limit_s=1.0))
    assert results[0] == 0 and results[4] == 40 and results[5] == 50
    assert results[1] == workers.Failure("the checking process crashed (SIGKILL)")
    assert results[2] == workers.Failure("took longer than 1 s (stopped)")
    assert results[3] == workers.Failure("loopcheck failed on it (ValueError: bad input)")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or not workers.can_isolate(), reason="Linux /proc")
def test_workers_do_not_outlive_a_killed_parent(project: Path) -> None:
    import subprocess
    import sys

    (project / "train.py").write_text(BUGGY)
    script = ("import time\nfrom loopcheck import checker\nchecker._check_job = lambda job: time.sleep(120)\n"
              "from loopcheck.cli import main\nmain(['check', '--no-cache', 'train.py'])\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=project)
    children: list[str] = []
    deadline = time.monotonic() + 60
    while not children and time.monotonic() < deadline:
        time.sleep(0.2)
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
    assert children, "no worker process started"
    parent.kill()  # SIGKILL: no cleanup runs in the parent
    parent.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{child}").exists() for child in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{child}/status").exists() and "zombie" not in
                   Path(f"/proc/{child}/status").read_text() for child in children)


class _Cycle:
    pass


_kept: list[object] = []


def _cycles(n: int) -> bool:
    """Job ``n``: ``n`` objects left in reference cycles (only the collector frees them); the first
    job also keeps a weak reference to one of them. Whether that one has been freed."""
    import weakref

    for _ in range(n):
        cycle = _Cycle()
        cycle.me = cycle  # type: ignore[attr-defined]
    if not _kept:
        _kept.append(weakref.ref(cycle))
    return _kept[0]() is None


@needs_fork
def test_a_worker_frees_the_garbage_of_its_jobs() -> None:
    """Garbage cycles left by jobs are collected between jobs once enough has built up."""
    freed = dict(workers.run(_cycles, [workers._GARBAGE_MARK + 1, 1], workers=1, time_limit_s=30.0))
    assert freed == {0: False, 1: True}


def test_a_worker_keeps_to_the_group_it_ran_last() -> None:
    pending = list(reversed([0, 1, 2, 3, 4]))  # taken from the end: job 0 first
    groups = ["a", "b", "a", "c", "b"]
    assert workers._next(pending, groups, "b", held={"a"}) == 1  # its own group's first job
    assert workers._next(pending, groups, "c", held={"a"}) == 3
    assert workers._next(pending, groups, "c", held={"a"}) == 4  # none of its own left: one nobody runs
    assert workers._next(pending, groups, None, held={"a", "b"}) == 0  # every group held: the first
    assert workers._next(pending, None, "a", held=set()) == 2


@needs_fork
def test_jobs_in_groups_all_finish() -> None:
    with workers.Pool(_job, 2, 30.0) as pool:
        results = dict(pool.run([0, 4, 5, 6], groups=["x", "y", "x", "y"]))
    assert results == {0: 0, 1: 40, 2: 50, 3: 60}
