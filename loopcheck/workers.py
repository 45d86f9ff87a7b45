"""Run one function over many jobs in worker processes that no single job can take down.

A job that raises, crashes its process (a segfault in a native parser) or runs past the time
limit gives a ``Failure`` for that job only: the worker is replaced and the other jobs go on.
Workers are forked after the jobs exist, so a job travels as its index and only results are
pickled. Where ``fork`` is not available the jobs run in this process (exceptions are still
caught; a crash or a hang cannot be contained there).
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

J = TypeVar("J")
R = TypeVar("R")


@dataclass(frozen=True)
class Failure:
    """Why a job gave no result: it raised, its process died, or it ran out of time."""

    reason: str


def can_isolate() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run(fn: Callable[[J], R], jobs: Sequence[J], workers: int, time_limit_s: float,
        order: Sequence[int] | None = None) -> Iterator[tuple[int, R | Failure]]:
    """Each job's index and ``fn(job)`` or a ``Failure``, as they finish. ``order``: the order in
    which to start the jobs (default: as given)."""
    order = list(range(len(jobs))) if order is None else list(order)
    if not can_isolate():
        for i in order:
            yield i, _call(fn, jobs[i])
        return
    pool = _Pool(fn, jobs, max(1, min(workers, len(order))), time_limit_s)
    try:
        yield from pool.run(order)
    finally:
        pool.close()


def _call(fn: Callable[[J], R], job: J) -> R | Failure:
    try:
        return fn(job)
    except Exception as error:  # one job's bug, a RecursionError, ...: that job's failure only
        return Failure(f"loopcheck failed on it ({_describe(error)})")


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__


def _serve(fn: Callable[[J], R], jobs: Sequence[J], conn: multiprocessing.connection.Connection) -> None:
    """A worker's loop: job indices in, ``(index, result or Failure)`` out, until ``None``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a crash is reported by the parent, once, not as a C traceback
    while True:
        try:
            index = conn.recv()
        except EOFError:
            return
        if index is None:
            return
        result = _call(fn, jobs[index])
        try:
            conn.send((index, result))
        except Exception as error:  # a result that cannot be pickled
            conn.send((index, Failure(f"result could not be sent back: {_describe(error)}")))


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    job: int | None = None
    started: float = 0.0


class _Pool(Generic[J, R]):
    def __init__(self, fn: Callable[[J], R], jobs: Sequence[J], size: int, time_limit_s: float) -> None:
        self.fn, self.jobs, self.size, self.time_limit_s = fn, jobs, size, time_limit_s
        self.context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []

    def _start(self) -> _Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(self.fn, self.jobs, child), daemon=True)
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

    def run(self, order: list[int]) -> Iterator[tuple[int, R | Failure]]:
        from multiprocessing.connection import wait

        pending = list(reversed(order))  # popped from the end
        while pending or any(w.job is not None for w in self.workers):
            idle = [w for w in self.workers if w.job is None]
            while pending and (idle or len(self.workers) < self.size):
                worker = idle.pop() if idle else self._start()
                worker.job, worker.started = pending.pop(), time.monotonic()
                worker.conn.send(worker.job)
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

    def close(self) -> None:
        """Idle workers are told to stop; busy ones (an interrupted run) are killed."""
        for worker in list(self.workers):
            if worker.job is None:
                try:
                    worker.conn.send(None)
                    worker.process.join(timeout=5)
                except OSError:
                    pass
            self._retire(worker)
