"""Runs several scenarios in one interpreter (torch is imported once), each through
``loopcheck.runtime.command.main`` with its stderr captured to ``NAME.stderr`` and its exit
code written to ``NAME.exit``. Used by the scenario tests only."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from loopcheck.runtime.command import main


def run(out_dir: Path) -> None:
    home = os.getcwd()
    for name, cwd, *argv in json.loads((out_dir / "jobs.json").read_text()):
        os.chdir(cwd)  # the project's pyproject.toml is found from the working directory
        with open(out_dir / f"{name}.stderr", "w") as err, contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except KeyboardInterrupt:
                code = 130
        (out_dir / f"{name}.exit").write_text(str(code))
        os.chdir(home)


if __name__ == "__main__":
    run(Path(sys.argv[1]))
