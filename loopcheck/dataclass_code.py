"""Compiled code of the methods ``dataclasses`` generates, kept on disk between runs.

``import libcst`` defines about 200 frozen dataclasses, and ``dataclasses`` writes each one's
``__init__``, ``__repr__``, ``__eq__``, ... as text and compiles it with ``exec``: about half of the
import (~70 of ~150 ms), which every ``loopcheck check`` that parses a file pays before any work.
Inside ``cached()`` the compiled code is looked up by that text in a file beside the result cache
(like Python's own ``__pycache__``: bytecode, not results, so it is used with ``--no-cache`` too)
and the compiler runs only for text not seen before. The same text compiles to the same code, so
the classes are exactly what they would be; an unreadable, foreign or unwritable file only costs
the compiling.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import types
from collections.abc import Callable, Iterator
from pathlib import Path

from loopcheck import marshal_file


def path(directory: Path) -> Path:
    """The file, per Python bytecode version (marshalled code is read by that version only)."""
    return directory / f"dataclass-code-{importlib.util.MAGIC_NUMBER.hex()}.marshal"


_lookup: Callable[[str], types.CodeType] | None = None  # inside ``cached()``: the kept code of a text


def code_of(text: str) -> types.CodeType:
    """``compile(text, "<string>", "exec")``, read from the kept code inside ``cached()``: for other
    code generated at import (``loopcheck.model.from_ast`` writes ~80 node builders)."""
    if _lookup is not None:
        return _lookup(text)
    return compile(text, "<string>", "exec", dont_inherit=True)


@contextlib.contextmanager
def cached(directory: Path) -> Iterator[None]:
    """Compile the methods of the dataclasses defined meanwhile from the code kept in ``directory``."""
    global _lookup
    if hasattr(dataclasses, "exec"):  # already inside (or another tool's hook): leave it alone
        yield
        return
    file = path(directory)
    known = _load(file)
    used: dict[str, types.CodeType] = {}

    def lookup(text: str) -> types.CodeType:
        code = known.get(text)
        if code is None:
            code = compile(text, "<string>", "exec", dont_inherit=True)  # as dataclasses' own exec
        used[text] = code
        return code

    def exec_(text: str, globals: dict[str, object] | None = None, locals: dict[str, object] | None = None) -> None:
        exec(lookup(text) if isinstance(text, str) else text, globals, locals)

    dataclasses.exec = exec_  # type: ignore[attr-defined]  # a module global shadows the builtin
    _lookup = lookup
    try:
        yield
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
        _lookup = None
    if used.keys() - known.keys():
        # The file is shared by every copy of loopcheck (one per Python version): the code other
        # copies used is kept, or two versions run in turn (a benchmark, two projects) would each
        # compile and rewrite it on every run. Up to twice what this run used, so it cannot grow
        # without end.
        merged = {**known, **used}
        _store(file, merged if len(merged) <= 2 * len(used) else used)


def _load(file: Path) -> dict[str, types.CodeType]:
    return marshal_file.read(file, lambda pairs: {text: code for text, code in pairs if isinstance(text, str)
                                                  and isinstance(code, types.CodeType)}, {})


def _store(file: Path, used: dict[str, types.CodeType]) -> None:
    marshal_file.write(file, list(used.items()))
