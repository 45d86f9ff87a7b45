"""A file of marshalled data beside the result cache, read whole and replaced whole.

For compiled code kept between runs (``loopcheck.dataclass_code``, ``loopcheck.module_code``):
best effort both ways, since a missing, foreign or unwritable file only costs compiling again.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def read(file: Path, parse: Callable[[Any], T], default: T) -> T:
    """``parse`` of the file's data; ``default`` where the file is missing or not what ``parse`` reads."""
    try:
        with open(file, "rb") as stream:
            # loads() of the bytes, not load() of the stream: load() calls the stream's readinto for
            # each object it reads, which made reading loopcheck's module code (~1.5 MB) take ~85 ms
            # instead of ~20 ms, at the start of every run.
            return parse(marshal.loads(stream.read()))
    except (OSError, EOFError, ValueError, TypeError):
        return default


def write(file: Path, data: object) -> None:
    """Replace the file by ``data``, or leave it as it is where it cannot be written (read-only, full)."""
    import tempfile  # only a run that compiled something new writes

    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-", suffix=".marshal")
        try:
            with os.fdopen(fd, "wb") as out:
                marshal.dump(data, out)
            os.replace(tmp, file)  # a concurrent run reads the old file or the new one, never half
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass
