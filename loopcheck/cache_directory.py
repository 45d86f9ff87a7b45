"""Where loopcheck keeps what it caches (results, compiled code): a module of its own, importable
before the rest of loopcheck."""

from __future__ import annotations

import os
from pathlib import Path


def default_directory() -> Path:
    if os.environ.get("LOOPCHECK_CACHE_DIR"):
        return Path(os.environ["LOOPCHECK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "loopcheck"
