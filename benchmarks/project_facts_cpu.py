"""CPU seconds of checking a corpus in one process (no cache, default rules, no profiler), and the
part spent on project facts: inside ``loopcheck.project.for_file``, ``Imported.summary`` / ``events``
/ ``backward_names`` / ``backward_name_candidates`` / ``digest`` or ``LazyProject.imports_own_module``,
counted once where they nest. Garbage is collected as a worker does (between jobs). Run it from two
checkouts side by side to compare them:

    PYTHONPATH=/work/main python benchmarks/project_facts_cpu.py /work/corpus/broad
    python benchmarks/project_facts_cpu.py /work/corpus/broad
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import loopcheck.engine as engine
import loopcheck.project as project
from loopcheck import checker, workers
from loopcheck.config import Config
from loopcheck.discovery import discover
from loopcheck.selection import resolve

_inside = [False]
_spent = [0.0]


def _timed(fn: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(fn)
    def timed(*args: object, **kwargs: object) -> object:
        if _inside[0]:
            return fn(*args, **kwargs)
        _inside[0], start = True, time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[0] += time.process_time() - start
            _inside[0] = False

    return timed


def main(argv: list[str] | None = None) -> int:
    target = Path((argv if argv is not None else sys.argv[1:])[0])
    for name in ("summary", "events", "backward_names", "backward_name_candidates", "digest"):
        setattr(project.Imported, name, _timed(getattr(project.Imported, name)))
    project.for_file = _timed(project.for_file)  # type: ignore[assignment]
    engine.LazyProject.imports_own_module = _timed(engine.LazyProject.imports_own_module)  # type: ignore[method-assign]
    os.chdir(target)
    codes = resolve()
    config = Config(root=Path.cwd())
    files = discover([Path(".")], config.root, [], True).files
    import loopcheck.model  # noqa: F401  (imported by the workers before the files are read)
    import loopcheck.positions  # noqa: F401

    _, todo, _ = checker._read(files, codes, config, None, engine.text_tests(codes), None)
    workers._collect_between_jobs()  # as a worker does: the default collector would walk the trees jobs hold
    start = time.process_time()
    findings = 0
    for job in todo:
        findings += len(checker._check_job(job)[0])
        if gc.get_count()[0] > workers._GARBAGE_MARK:
            gc.collect()
    print(f"{len(todo)} files checked, {findings} findings; checking {time.process_time() - start:.2f} CPU s, "
          f"of which project facts {_spent[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
