"""Running ``loopcheck run`` (or plain ``python``) as a separate process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loopcheck_run_argv() -> list[str]:
    """The real CLI once ``loopcheck/__main__.py`` exists, else the runtime command directly."""
    if (ROOT / "loopcheck" / "__main__.py").exists():
        return [sys.executable, "-m", "loopcheck", "run"]
    return [sys.executable, "-c", "import sys; from loopcheck.runtime.command import main; "
            "sys.exit(main(sys.argv[1:]))"]


def env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""))


def run(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)


def loopcheck_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(loopcheck_run_argv() + args, cwd)


def python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, *args], cwd)
