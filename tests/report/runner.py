"""Runs ``loopcheck`` command lines one after another in one interpreter (torch is imported once):
``python -m tests.report.runner OUT`` reads ``OUT/jobs.json`` (``[name, *argv]`` each) and leaves
``NAME.stderr`` and ``NAME.exit`` in OUT. Used by the report tests' fixtures only."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from loopcheck.cli import main


def run(out: Path) -> None:
    for name, *argv in json.loads((out / "jobs.json").read_text()):
        sys.argv[:] = ["loopcheck", *argv]  # as the console script sees it (the page's header shows it)
        with open(out / f"{name}.stderr", "w") as err, contextlib.redirect_stderr(err):
            code = main(argv)
        (out / f"{name}.exit").write_text(str(code))


if __name__ == "__main__":
    run(Path(sys.argv[1]))
