"""Compiled code of loopcheck's own modules, kept beside the result cache when Python keeps none.

Where ``__pycache__`` cannot be written (``PYTHONDONTWRITEBYTECODE``, a read-only install), every
``loopcheck check`` compiled each of its ~100 modules from source again: ~0.15 CPU s, a third of
checking one training script. ``install()`` (called by the command line, before it imports the
rest) has those modules' code looked up in a file beside the result cache, one per copy of
loopcheck (like ``loopcheck.dataclass_code``: bytecode, not results, so it is used with
``--no-cache`` too), by the module's source text, so an edited module is compiled again and never
run stale. Where Python writes ``__pycache__`` itself, or the file cannot be read or written,
nothing changes.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import types
from pathlib import Path

from loopcheck import marshal_file

_PACKAGE = __name__.partition(".")[0]


def path(directory: Path) -> Path:
    """The file, per Python bytecode version (marshalled code is read by that version only) and per
    copy of loopcheck (each run reads the whole file: the code of other copies would only cost)."""
    copy = hashlib.sha1(os.path.dirname(os.path.abspath(__file__)).encode()).hexdigest()[:16]
    return directory / f"module-code-{importlib.util.MAGIC_NUMBER.hex()}-{copy}.marshal"


def install(directory: Path) -> None:
    """Compile loopcheck's modules imported from now on from the code kept in ``directory``."""
    if not sys.dont_write_bytecode or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    finder = _Finder(path(directory))
    sys.meta_path.insert(0, finder)
    atexit.register(finder.save)


class _Finder:
    """Finds loopcheck's submodules as Python would, with ``_Loader`` instead of its source loader."""

    def __init__(self, file: Path) -> None:
        self.file = file
        # module file -> (digest of its source, its code marshalled: unmarshalled when imported)
        self.known: dict[str, tuple[bytes, bytes]] | None = None
        self.new: dict[str, tuple[bytes, bytes]] = {}

    def find_spec(self, name: str, search_path: object = None, target: object = None) -> object:
        if not name.startswith(_PACKAGE + ".") or search_path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, search_path)  # type: ignore[arg-type]
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _Loader(spec.loader.name, spec.loader.path, self)
        return spec

    def code(self, name: str, source: bytes, compile_: object) -> types.CodeType:
        """``name``: the module's file (its code names it in tracebacks)."""
        if self.known is None:
            self.known = _load(self.file)
        digest = hashlib.sha1(source).digest()
        kept = self.known.get(name)
        if kept is not None and kept[0] == digest:
            try:
                code = marshal.loads(kept[1])
            except (EOFError, ValueError, TypeError):
                code = None
            if isinstance(code, types.CodeType):
                return code
        code = compile_()  # type: ignore[operator]
        self.new[name] = (digest, marshal.dumps(code))
        return code  # type: ignore[no-any-return]

    def save(self) -> None:
        if not self.new:
            return
        merged = {**(self.known or _load(self.file)), **self.new}
        self.new = {}
        marshal_file.write(self.file, [(n, d, c) for n, (d, c) in merged.items()])


class _Loader(importlib.machinery.SourceFileLoader):
    def __init__(self, name: str, file: str, finder: _Finder) -> None:
        super().__init__(name, file)
        self.finder = finder

    def get_code(self, fullname: str) -> types.CodeType:
        source = self.get_data(self.path)
        return self.finder.code(self.path, source, lambda: self.source_to_code(source, self.path))


def _load(file: Path) -> dict[str, tuple[bytes, bytes]]:
    """Each module's code is kept marshalled on its own, and unmarshalled only when that module is
    imported: a run imports some of the modules the file holds (a check whose files are all
    cached, none of the rules), and unmarshalling all of them took ~25 ms."""
    return marshal_file.read(file, lambda triples: {
        name: (digest, code) for name, digest, code in triples
        if isinstance(name, str) and isinstance(digest, bytes) and isinstance(code, bytes)}, {})
