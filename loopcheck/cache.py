"""The result cache: a file's findings, reused while its text, the configuration and loopcheck stay
the same (like ruff's cache). A cached file is neither parsed nor modelled, and ``libcst`` and the
rules are not even imported when every candidate file is cached.

Key of an entry: SHA-256 of the file's text (suppression comments included), its display name,
the codes checked in it (selection and per-file ignores), the rule options, and loopcheck itself
(its version and the size and mtime of every module of the installed package, so an edited
checkout never serves stale results). A file whose check used facts of other modules of its
project (``loopcheck.project``) records their digest, and its entry is used only while the digest
is the same: only those files pay for reading the facts on a warm run. Entries are single JSON files written to a temporary file
and renamed into place (``os.replace``), so concurrent runs never see half an entry. A corrupt or
foreign entry is a miss; a cache directory that cannot be created or written disables the cache
for the run. Entries live in one directory per loopcheck build and options
(``v1/<config key>/``); when a new one is created, all but the most recent few of the others are
removed (those untouched for 10 minutes: a concurrent run of another build keeps its own).

Location: ``$LOOPCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/loopcheck``, else ``~/.cache/loopcheck``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, fields
from pathlib import Path

from loopcheck import __version__
from loopcheck.cache_directory import default_directory  # noqa: F401  (re-exported: callers import it from here)
from loopcheck.config import Options
from loopcheck.engine import TextTest
from loopcheck.findings import Finding

FORMAT = "loopcheck-cache"
FORMAT_VERSION = 2
_KEEP_BUILDS = 4  # entry directories of other builds/options kept when a new one is made
_PRUNE_AFTER_S = 600
_FIELDS = frozenset(f.name for f in fields(Finding)) - {"filename"}


def package_fingerprint() -> str:
    """loopcheck's version and the size and mtime of each of its modules."""
    root = Path(__file__).resolve().parent
    stamp = hashlib.sha256(__version__.encode())
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(directory, name))
                stamp.update(f"{os.path.relpath(os.path.join(directory, name), root)}:{st.st_size}:{st.st_mtime_ns};"
                             .encode())
    return stamp.hexdigest()


class Cache:
    """Findings by file; ``enabled`` turns False when the directory cannot be used."""

    def __init__(self, directory: Path, options: Options = Options()) -> None:
        self.config_key = hashlib.sha256(f"{package_fingerprint()}|{options!r}".encode()).hexdigest()
        self.directory = directory / f"v{FORMAT_VERSION}" / self.config_key[:24]
        self.enabled = True
        self.hits = self.misses = 0
        try:
            if not self.directory.is_dir():
                self.directory.mkdir(parents=True, exist_ok=True)
                _prune(self.directory)
        except OSError:
            self.enabled = False

    @property
    def project_directory(self) -> Path:
        """Where the project facts are cached: beside the results of every version and setting."""
        return self.directory.parent.parent / "project"

    def key(self, name: str, codes: Iterable[str], source: str) -> str:
        digest = hashlib.sha256(f"{self.config_key}|{name}|{','.join(sorted(codes))}|".encode())
        digest.update(source.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str, name: str, project: Callable[[str], str | None] | None = None) -> list[Finding] | None:
        """The cached findings of the file (with ``name`` as their filename), or None. An entry made
        with facts of other project modules is used only while ``project(digest)`` (their digest
        now, told which facts the entry's digest covers) gives the same digest."""
        if not self.enabled:
            return None
        data = self._read(key)
        try:
            if not isinstance(data, dict):
                raise ValueError
            findings = [_finding(item, name) for item in data["findings"]]
            used = data["project"]
            if used is not None and (project is None or project(used) != used):
                raise ValueError("a fact of another module changed")
        except (TypeError, ValueError, KeyError):
            self.misses += 1
            return None
        self.hits += 1
        return findings

    def put(self, key: str, findings: Sequence[Finding], project: str | None = None) -> None:
        """``project``: the digest of the other modules' facts the findings used (None: none)."""
        self._write(key, {"findings": [{k: v for k, v in asdict(f).items() if k != "filename"} for f in findings],
                          "project": project})

    def text_tests(self, codes: frozenset[str], compute: Callable[[], tuple[TextTest, ...]]) -> tuple[TextTest, ...]:
        """The pre-filter of ``codes`` (cached: computing it imports every rule)."""
        key = "text-tests-" + hashlib.sha256(f"{self.config_key}|{','.join(sorted(codes))}".encode()).hexdigest()
        data = self._read(key) if self.enabled else None
        try:
            if isinstance(data, list) and data and all(
                    isinstance(t, list) and len(t) == 4 and all(isinstance(x, str) for x in t[0] + t[1] + t[3])
                    for t in data):
                return tuple(TextTest(tuple(a), tuple(b), bool(c), tuple(d)) for a, b, c, d in data)
        except (TypeError, ValueError):
            pass  # a foreign entry: computed again
        tests = compute()
        self._write(key, [[list(t.any_of), list(t.all_of), t.training_loop, list(t.without_loop)] for t in tests])
        return tests

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def _read(self, key: str) -> object:
        try:
            data = json.loads(self._path(key).read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        if isinstance(data, dict) and data.get(FORMAT) == FORMAT_VERSION and data.get("key") == key:
            return data.get("value")
        return None

    def _write(self, key: str, value: object) -> None:
        if not self.enabled:
            return
        import tempfile  # (with ``random``) only where something is written: not on a warm re-run

        text = json.dumps({FORMAT: FORMAT_VERSION, "key": key, "value": value}, separators=(",", ":"))
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, self._path(key))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            self.enabled = False  # read-only or full: run on without the cache


def _prune(current: Path) -> None:
    """Remove the entry directories of other builds, but the ``_KEEP_BUILDS`` most recent and any
    touched in the last ``_PRUNE_AFTER_S`` seconds."""
    import shutil
    import time

    try:
        others = [(entry.stat().st_mtime, entry.path) for entry in os.scandir(current.parent)
                  if entry.is_dir() and entry.path != str(current)]
    except OSError:
        return
    others.sort(reverse=True)
    for mtime, path in others[_KEEP_BUILDS:]:
        if time.time() - mtime > _PRUNE_AFTER_S:
            shutil.rmtree(path, ignore_errors=True)


def _finding(item: object, name: str) -> Finding:
    if not isinstance(item, dict) or set(item) != _FIELDS:
        raise ValueError("foreign entry")
    for key, value in item.items():
        expected = _TYPES.get(key, str)
        if not isinstance(value, expected) or isinstance(value, bool) and expected is int:
            raise ValueError(f"foreign entry: {key}")
    return Finding(filename=name, **item)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "line": int, "col": int, "end_line": int, "end_col": int, "fix_message": (str, type(None)), "fix_safe": bool}
