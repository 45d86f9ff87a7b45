"""Runs the ``runtime/ddp_*.py`` scenarios one after the other in the ranks of ONE torchrun
job (each torchrun start costs seconds): every rank calls ``loopcheck.runtime.command.main``
for each scenario, which starts and ends its own process group. Per scenario and rank the
stderr goes to ``NAME.rankR.stderr`` and the exit code to ``NAME.rankR.exit``; the reports
are ``NAME.json`` (merged by rank 0) and ``NAME.rankR.json`` (the parts).

    torchrun --standalone --nproc_per_node=2 -m tests.runtime.ddp_batch_runner OUT_DIR

``OUT_DIR/jobs.json`` lists ``[name, *loopcheck run arguments]``."""
from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from loopcheck.runtime.command import main


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Redirect file descriptor 2, not just ``sys.stderr``: log handlers that an earlier job set
    up (torch's) keep the ``sys.stderr`` object of their time and must not write to a closed file."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "w") as err:
            os.dup2(err.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def run(out_dir: Path) -> None:
    rank = os.environ.get("RANK", "0")
    # Each job gets a fresh key-value store (rank 0 hosts it on the next port): a process group
    # re-created on torchrun's own store after destroy_process_group() reuses the same keys,
    # and a rank that arrives early reads the other rank's stale gloo address from them.
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    base_port = int(os.environ.get("MASTER_PORT", "29500"))
    for number, (name, *argv) in enumerate(json.loads((out_dir / "jobs.json").read_text()), start=1):
        os.environ["MASTER_PORT"] = str(base_port + number)
        os.environ.pop("LOOPCHECK_CONSISTENCY_EVERY", None)  # options of the previous job
        with _stderr_to(out_dir / f"{name}.rank{rank}.stderr"):
            try:
                code = main(argv)
            except KeyboardInterrupt:
                code = 130
        (out_dir / f"{name}.rank{rank}.exit").write_text(str(code))
        gc.collect()  # models of this job must not be counted by the next (FSDP modules)


if __name__ == "__main__":
    run(Path(sys.argv[1]))
