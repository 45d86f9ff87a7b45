"""Run one function over many jobs in worker processes that no single job can take down.

A job that raises, crashes its process (a segfault in a native parser) or runs past the time
limit gives a ``Failure`` for that job only: the worker is replaced and the other jobs go on.
Workers are forked when the pool is made (or grown), before all the jobs are known, so that they
import what the jobs need (libcst, the rules) while the caller is still finding and reading files: ``warm``
runs in each of them first. Where
``fork`` is not available the jobs run in this process (exceptions are still caught; a crash or a
hang cannot be contained there).
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

J = TypeVar("J")
R = TypeVar("R")


@dataclass(frozen=True)
class Failure:
    """Why a job gave no result: it raised, its process died, or it ran out of time."""

    reason: str


def can_isolate() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _call(fn: Callable[[J], R], job: J) -> R | Failure:
    try:
        return fn(job)
    except Exception as error:  # one job's bug, a RecursionError, ...: that job's failure only
        return Failure(f"loopcheck failed on it ({_describe(error)})")


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__


def _serve(fn: Callable[[Any], Any], warm: Callable[[], Any] | None, conn: Connection, parent: int) -> None:
    """A worker of process ``parent``: ``warm()``, then ``(index, job)`` in and ``(index, result or
    Failure)`` out, until the connection closes."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a crash is reported by the parent, once, not as a C traceback
    if warm is not None:
        _call(lambda _: warm(), None)  # a failure here shows again in the jobs
    _collect_between_jobs()
    while True:
        try:
            index, job = conn.recv()
        except EOFError:
            return
        result = _call(fn, job)
        try:
            conn.send((index, result))
        except Exception as error:  # a result that cannot be pickled
            conn.send((index, Failure(f"the result could not be sent back ({_describe(error)})")))
        if gc.get_count()[0] > _GARBAGE_MARK:
            gc.collect()


# Objects (net) a worker allocates before it collects garbage between two jobs, and before the
# collector interrupts a job that allocates that many more.
_GARBAGE_MARK = 500_000


def _collect_between_jobs() -> None:
    """Python's collector runs every 700 new objects and walks the young ones; a job builds whole
    syntax trees that stay alive while it runs, so it walked each node of each tree several times,
    (about a third of a worker's time on 46 ML repositories) to free the few reference cycles a job
    leaves. The imports are frozen (never walked again), and garbage is collected between jobs once
    enough has built up; the collector still runs within a job that allocates far more."""
    gc.freeze()
    gc.set_threshold(4 * _GARBAGE_MARK)


def _die_with_parent(parent: int) -> None:
    """Linux: be killed when the parent dies, even one stuck in a read (the parent killed -9)."""
    prctl = _prctl()
    if prctl is None:
        return  # elsewhere a worker ends when it next reads from the closed pipe
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    # The signal is armed only from here on: a parent that died since the fork sends none.
    if os.getppid() != parent:
        os._exit(0)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, where there is one: looked up by the pool before it forks a worker, so that
    the workers inherit it instead of each importing ``ctypes`` (~15 M instructions) again."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    job: int | None = None
    started: float = 0.0
    job_group: Hashable | None = None  # the group of the job it ran last


class Pool(Generic[J, R]):
    """Up to ``size`` worker processes running ``fn``; use as a context manager. ``start`` of them
    are started now (all by default), more by ``grow`` or when ``run`` has jobs for them."""

    def __init__(self, fn: Callable[[J], R], size: int, time_limit_s: float,
                 warm: Callable[[], Any] | None = None, start: int | None = None) -> None:
        self.fn, self.size, self.time_limit_s, self.warm = fn, max(1, size), time_limit_s, warm
        self.isolated = can_isolate()
        self.workers: list[_Worker] = []
        if self.isolated:
            self.context = multiprocessing.get_context("fork")
            for _ in range(self.size if start is None else min(max(1, start), self.size)):
                self.grow()

    def __enter__(self) -> Pool[J, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grow(self) -> None:
        """Start one more worker, unless there are ``size`` already."""
        if self.isolated and len(self.workers) < self.size:
            self._start()

    def run(self, jobs: Sequence[J], order: Sequence[int] | None = None,
            groups: Sequence[Hashable] | None = None) -> Iterator[tuple[int, R | Failure]]:
        """Each job's index and ``fn(job)`` or a ``Failure``, as they finish, started in ``order``;
        with ``groups`` (one per job), a worker takes the next job of the group it last ran while
        there is one (jobs of one group share what a worker reads for the first of them)."""
        order = list(range(len(jobs))) if order is None else list(order)
        if not self.isolated:
            for i in order:
                yield i, _call(self.fn, jobs[i])
            return
        pending = list(reversed(order))  # popped from the end
        while pending or any(w.job is not None for w in self.workers):
            idle = [w for w in self.workers if w.job is None]
            while pending and (idle or len(self.workers) < self.size):
                worker = idle.pop() if idle else self._start()
                held = {w.job_group for w in self.workers if w.job is not None}
                worker.job, worker.started = _next(pending, groups, worker.job_group, held), time.monotonic()
                worker.job_group = groups[worker.job] if groups is not None else None
                worker.conn.send((worker.job, jobs[worker.job]))
            busy = [w for w in self.workers if w.job is not None]
            deadline = min(w.started for w in busy) + self.time_limit_s
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                             timeout=max(0.0, deadline - time.monotonic())))
            now = time.monotonic()
            for worker in busy:
                index = worker.job
                assert index is not None
                if worker.conn in ready:
                    try:
                        got, result = worker.conn.recv()
                    except (EOFError, OSError):  # died while answering
                        yield index, self._died(worker)
                        continue
                    worker.job = None
                    yield got, result
                elif worker.process.sentinel in ready:
                    yield index, self._died(worker)
                elif now - worker.started >= self.time_limit_s:
                    self._retire(worker)
                    yield index, Failure(f"took longer than {self.time_limit_s:g} s (stopped)")

    def close(self) -> None:
        """Stop the workers. They hold nothing to clean up, and one may still be importing or
        checking (an interrupted run): they are killed rather than waited for."""
        for worker in list(self.workers):
            self._retire(worker)

    def _start(self) -> _Worker:
        _prctl()  # here, once, not in each worker
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(self.fn, self.warm, child, os.getpid()),
                                        daemon=True)
        process.start()
        child.close()
        worker = _Worker(process, parent)
        self.workers.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        self.workers.remove(worker)
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join()
        worker.conn.close()

    def _died(self, worker: _Worker) -> Failure:
        worker.process.join()
        code = worker.process.exitcode
        self._retire(worker)
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return Failure(f"the checking process crashed ({name})")
        return Failure(f"the checking process exited with status {code}")


def _next(pending: list[int], groups: Sequence[Hashable] | None, group: Hashable | None,
          held: set[Hashable | None]) -> int:
    """Take the next job of ``pending`` (in reverse order) for a worker that last ran a job of
    ``group``: the first of that group if there is one, else the first of a group no other worker
    is running (``held``), else the first."""
    if groups is not None:
        for wanted in (lambda g: g == group, lambda g: g not in held):
            for i in range(len(pending) - 1, -1, -1):
                if wanted(groups[pending[i]]):
                    return pending.pop(i)
    return pending.pop()


def run(fn: Callable[[J], R], jobs: Sequence[J], workers: int, time_limit_s: float,
        order: Sequence[int] | None = None) -> Iterator[tuple[int, R | Failure]]:
    """``Pool(fn, workers, time_limit_s).run(jobs, order)``, with the pool closed afterwards."""
    with Pool(fn, min(workers, max(1, len(jobs))), time_limit_s) as pool:
        yield from pool.run(jobs, order)
