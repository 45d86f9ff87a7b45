"""A distributed job's report: every rank writes its part (``r.json`` -> ``r.rank<N>.json``)
and publishes it in the process group's key-value store (kept by ``hooks.distributed``: it
outlives ``destroy_process_group``); rank 0 collects the parts, from the store or else from the
part files, and merges them (``merge``)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..hooks.distributed import DistributedHooks

# rank 0 waits this long for the other ranks' parts after a normal end (seconds; env overrides)
MERGE_TIMEOUT = 60.0
# after an exception, SIGTERM or Ctrl-C the other ranks are likely gone or stuck: merge quickly
MERGE_TIMEOUT_ABNORMAL = 3.0
STORE_PREFIX = "loopcheck/part"


def part_path(path: str, rank: int) -> str:
    """``r.json`` -> ``r.rank3.json``: where rank 3 writes its part of the report."""
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.json'}"


def outputs(dist: DistributedHooks, data: dict[str, Any], report_path: str | None,
            print_summary: bool) -> tuple[dict[str, Any], str | None, bool]:
    """Add the distributed section; in a job of several ranks write this rank's part and,
    on rank 0, return the merged report in its place. Returns (data, path, print_summary)
    for the session to write and print; other ranks print one line themselves."""
    data["distributed"] = dist.section()
    info = dist.rank()
    if not info.distributed:
        return data, report_path, print_summary
    text = json.dumps(data, default=str)
    if report_path:
        from .report import write_report_atomically

        try:
            with _sigterm_held():  # torchrun stops the other ranks with SIGTERM when one fails
                write_report_atomically(part_path(report_path, info.rank), data)
        except OSError as exc:
            print(f"loopcheck: rank {info.rank} could not write its part of the report: {exc}",
                  file=sys.stderr)
    _publish(dist, info.rank, text)
    if info.rank != 0:
        if print_summary:
            found = len(data["findings"])
            where = f"; part written to {part_path(report_path, info.rank)}" if report_path else ""
            print(f"loopcheck: rank {info.rank}: {found} finding{'s' if found != 1 else ''}"
                  f"{where} (rank 0 prints the merged summary)", file=sys.stderr)
        return data, None, False
    from .merge import merge_parts

    parts = _collect(dist, info.world_size, data, report_path)
    return merge_parts(parts, world_size=info.world_size), report_path, print_summary


def _publish(dist: DistributedHooks, rank: int, text: str) -> None:
    if dist.store is None:
        return
    try:
        dist.store.set(f"{STORE_PREFIX}/{dist.number}/{rank}", text)
    except Exception:  # noqa: BLE001 - the store's host may be gone: the file remains
        dist.store = None


def _collect(dist: DistributedHooks, world_size: int, own: dict[str, Any],
             report_path: str | None) -> list[dict[str, Any]]:
    status = dist.session.exit_status
    limit = MERGE_TIMEOUT if status.get("how") in ("finished", "sys.exit") and not status.get("code") \
        else MERGE_TIMEOUT_ABNORMAL
    limit = float(os.environ.get("LOOPCHECK_MERGE_TIMEOUT", limit))
    parts: dict[int, dict[str, Any]] = {0: own}
    if dist.store is None and not report_path:
        limit = 0.0  # nowhere to receive parts from
    deadline = time.monotonic() + limit
    while True:
        for rank in range(1, world_size):
            if rank not in parts:
                part = _fetch(dist, rank, report_path)
                if part is not None:
                    parts[rank] = part
        if len(parts) == world_size or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return [parts[r] for r in sorted(parts)]


def _fetch(dist: DistributedHooks, rank: int, report_path: str | None) -> dict[str, Any] | None:
    if dist.store is not None:
        key = f"{STORE_PREFIX}/{dist.number}/{rank}"
        try:
            if dist.store.check([key]):
                return json.loads(dist.store.get(key))
        except Exception:  # noqa: BLE001 - store gone: fall back to the files
            dist.store = None
    if report_path:
        path = part_path(report_path, rank)
        try:
            if os.path.getmtime(path) >= dist.started_wall - 1:  # not a part of an older run
                with open(path, encoding="utf-8") as handle:
                    return json.load(handle)
        except (OSError, ValueError):
            return None
    return None


@contextlib.contextmanager
def _sigterm_held() -> Iterator[None]:
    """Hold SIGTERM back while this rank's part is written (delivered right after)."""
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    except (AttributeError, ValueError, OSError):  # not POSIX, or not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
