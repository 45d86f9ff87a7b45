"""The project a checked file belongs to: its root, its modules' facts (cached), its imports.

The root is the nearest directory above the file holding ``pyproject.toml``, ``setup.py``,
``setup.cfg`` or ``.git`` (pre-commit passes single files: the index is read from there), or
else the directory above the file's outermost package. Module
facts are read with ``ast`` only for the modules a checked file imports, plus the project files
whose text builds a DDP wrapper (the entry script that imports the training loop; not searched in
a tree too large to be one project); they are cached on disk per root, keyed by each file's size
and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Collection, Iterable
from dataclasses import replace
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern
from loopcheck.project.facts import ModuleFacts, ModuleReader

if TYPE_CHECKING:
    import ast

_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_SKIP_DIRS = {".git", ".hg", ".tox", ".nox", ".venv", "venv", "env", "node_modules", "__pycache__", "site-packages",
              "build", "dist", ".eggs"}
# a wrap being built, not an isinstance() test (nor `smart_DDP(`: a name ending in DDP is another name)
_DDP_CALL = Pattern(rb"(DistributedDataParallel(?<!\wDistributedDataParallel)|DDP(?<!\wDDP))\s*\(")
# The words after `def`/`class` (the lookahead lets `class def x` yield both words); each pattern
# starts with its keyword, which the engine searches for fast (a leading `\b` would test every byte).
_DEFINES = (Pattern(rb"def(?<!\wdef)\s+(?=(\w+))"), Pattern(rb"class(?<!\wclass)\s+(?=(\w+))"))
_DEFS = Pattern(rb"def(?<!\wdef)\s+(\w+)")
# `from .train import Trainer, evaluate` (or a bracketed list) in a package's `__init__.py` (no character
# class nested in a repeat: linear on any text)
_REEXPORT = Pattern(rb"^from[ \t]+(\.[\w.]*|\w[\w.]*)[ \t]+import[ \t]+(?:\(([\w\s,]*)\)|([\w \t,]*)$)", re.M)
_MAX_BYTES = 2_000_000
# A tree past either bound is a collection of projects (a home directory, a folder of checkouts), not
# one project: its entry scripts are not searched (on 87,000 files that search took minutes).
_MAX_WALKED = 20_000  # Python files under the root
_MAX_DDP_FILES = 100  # files building a DDP wrapper (the repositories measured hold at most 7)
_FORMAT = 30
_KEEP_TEXTS = 64
# Parsed modules kept for more of their names (a loop calls one imported function, then another;
# the next file imports others), up to this much source text (their trees take ~35 bytes a character).
_READERS: dict[tuple[str, int, int], ModuleReader] = {}
_KEEP_CHARS = 1_000_000


def class_bases(text: str, name: str) -> str | None:
    """``ProjectIndex.class_bases`` of a module's text."""
    found = re.search(rf"^class\s+{re.escape(name)}\s*(?:\(([^)]*)\))?\s*:", text, re.M)
    return None if found is None else (found.group(1) or "").strip()


def find_root(path: Path) -> Path:
    """The nearest ancestor directory of ``path`` that marks a project (the file's directory if none)."""
    return _root_of(real_path(path).parent)


@lru_cache(maxsize=4096)
def marked_folder(directory: Path) -> Path | None:
    """The nearest of ``directory`` and its ancestors that holds a project marker, if any (the
    directories of a project share their ancestors: each is looked at once)."""
    if any(os.path.exists(os.path.join(directory, marker)) for marker in _MARKERS):
        return directory
    parent = directory.parent
    return None if parent == directory else marked_folder(parent)


_REAL: dict[Path, Path] = {}


def real_path(path: Path) -> Path:
    """``path.resolve()``, made once per run for each path: it costs a system call per part of the
    path, and a warm run asked it about five times for each file whose facts it reads."""
    found = _REAL.get(path)
    if found is None:
        found = _REAL[path] = path.resolve()
    return found


@lru_cache(maxsize=4096)  # the files of one directory share it
def _root_of(start: Path) -> Path:
    marked = marked_folder(start)
    if marked is not None:
        return marked
    while (start / "__init__.py").is_file() and start.parent != start:
        start = start.parent  # no marker: the directory above the outermost package
    return start



def files_stamp(paths: Iterable[str]) -> str:
    """The size and modification time of each file (one that is gone left out), hashed: what a cached
    result that read those files depends on."""
    digest = hashlib.sha256()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()

class ProjectIndex:
    """Facts of one project's modules, read lazily and cached on disk."""

    def __init__(self, root: Path, cache_dir: Path | None) -> None:
        self.root = root
        self.cache_file = cache_dir / f"{hashlib.sha256(str(root).encode()).hexdigest()[:24]}.json" \
            if cache_dir is not None else None
        self.entries: dict[str, list[object]] = self._load()  # rel path -> [size, mtime_ns, facts or None]
        self.dirty = False
        self.fresh: dict[str, list[object]] = {}  # entries read since ``take_fresh``
        self._ddp_files: list[ModuleFacts] | None = None
        self._resolved: dict[tuple[str, str, int], Path | None] = {}
        self._resolved_from: dict[tuple[Path, str, int], Path | None] = {}  # the same, by importer
        self._in_bases: dict[tuple[str, ...], Path | None] = {}  # (directory, *module's parts) -> its file
        self._above: dict[str, list[Path]] = {}  # a directory -> the folders between it and the root
        self._src = root / "src"
        self._relatives: dict[Path, str] = {}
        self._directories: dict[str, Path] = {}  # an importer -> its real directory
        self._listings: dict[str, frozenset[str]] = {}
        self._texts: dict[Path, bytes] = {}
        self._exports: dict[Path, dict[str, str]] = {}  # a package's names -> the module re-exporting them
        self._defines: dict[Path, frozenset[bytes]] = {}  # the words a `def`/`class` of each file's text names
        self._decoded: dict[str, tuple[object, ModuleFacts]] = {}  # rel path -> (its entry's facts, decoded)
        self.ddp_imports: list[tuple[str, Path]] | None = None  # see loopcheck.project._ddp_imports
        self.ddp_passes: list[tuple[str, str, str]] | None = None  # see loopcheck.project._ddp_passes
        self.ddp_handed: list[tuple[str, Path]] | None = None  # see loopcheck.project.ddp_helpers.handed
        self.ddp_helper_callers: list[tuple[Path, bytes]] | None = None  # see loopcheck.project.ddp_helpers._callers
        self.ddp_relays: dict[Path, set[str]] | None = None  # see loopcheck.project.ddp_helpers._relays
        self.ddp_relay_callers: list[tuple[Path, bytes]] | None = None  # see loopcheck.project.ddp_helpers._callers
        # (file, function, parameter, position) -> see loopcheck.project.callers.passed
        self.passed_schedulers: dict[tuple[str, str, str, int | None], object] = {}
        self.unset_keywords: dict[str, int | None] = {}  # see loopcheck.project.unset_keywords
        self.option_defaults: dict[str, float | None] = {}  # see loopcheck.project.option_defaults
        self.named_strings: dict[frozenset[str], frozenset[str] | None] = {}  # see loopcheck.project.named_strings
        self._files: list[tuple[str, str]] | None = None
        self._walked: list[tuple[str, list[str]]] = []  # (directory, its files) of that walk
        self._documents: list[str] | None = None  # those a configuration may be in
        self.settings: dict[str, bool] = {}  # see loopcheck.project.inert_settings.inert
        self.setting_scopes: dict[Path, tuple[str | None, str | None]] = {}  # see inert_settings._scopes
        self.experiment_series: dict[tuple[Path, str], frozenset[Path]] = {}  # see inert_settings._series
        self.settings_stamp: str | None = None  # see loopcheck.project.inert_settings.stamp
        self._python_stamp: str | None = None

    # -- modules ---------------------------------------------------------------------------
    def facts(self, path: Path, functions: bool = True, tree: ast.Module | None = None,
              names: Collection[str] | None = None, returns: bool = False) -> ModuleFacts | None:
        """The facts of one project file (None when it cannot be read); ``functions=False`` is
        content with its imports and DDP wraps, ``names`` with those of some top-level functions
        and classes; ``returns``: with its ``returned_calls``; ``tree``: its ``ast``, if already parsed."""
        try:
            st = path.stat()
            rel = self._relative(path)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None  # a FIFO named x.py would block the read
        entry = self.entries.get(rel)
        cached = None
        if entry is not None and entry[0] == st.st_size and entry[1] == st.st_mtime_ns and entry[2] is not None:
            decoded = self._decoded.get(rel)
            if decoded is not None and decoded[0] is entry[2]:
                cached = decoded[1]
            else:
                try:
                    cached = ModuleFacts.from_json(entry[2])  # type: ignore[arg-type]
                    self._decoded[rel] = (entry[2], cached)
                except (KeyError, TypeError, ValueError):
                    pass
            if cached is not None and (cached.knows(names) if functions else cached.outlined) \
                    and (not returns or cached.returned_calls is not None):
                return cached
        if st.st_size > _MAX_BYTES:
            return None
        key = (str(path), st.st_size, st.st_mtime_ns)
        reader = _READERS.pop(key, None)
        if reader is None:
            try:
                source = path.read_text(encoding="utf-8-sig", errors="replace")
            except OSError:
                return None
            reader = ModuleReader(source, rel, tree)
        reader.adopt(tree)
        _READERS[key] = reader  # the most recent last
        kept = sum(len(r.source) for r in _READERS.values())
        while len(_READERS) > 1 and kept > _KEEP_CHARS:
            kept -= len(_READERS.pop(next(iter(_READERS))).source)
        if cached is None:
            # a lookup of some names reads only their blocks: the imports wait until asked for
            cached = ModuleFacts(rel, complete=False, outlined=False) if functions and names is not None \
                else reader.outline()
        found = cached if cached.outlined or functions else cached.with_outline(reader.outline())
        if functions:
            found = reader.read(found, names)
        if returns and found.returned_calls is None:
            found = replace(found, returned_calls=reader.returned_calls())
        entry = [st.st_size, st.st_mtime_ns, found.to_json()]
        self._put(rel, entry)
        self._decoded[rel] = (entry[2], found)
        return found

    def relative(self, path: Path) -> str:
        return self._relative(path)

    def text_of(self, path: Path) -> bytes:
        """The text of ``path`` (b"" if unreadable or too large), read now and not kept."""
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
                return b""
            with open(path, "rb") as file:
                return file.read()
        except OSError:
            return b""

    @staticmethod
    def oversized(path: Path) -> bool:
        """A file ``text_of`` does not read for its size (a notebook kept with its outputs)."""
        try:
            return os.stat(path).st_size > _MAX_BYTES
        except OSError:
            return False

    def python_files(self) -> list[Path]:
        """Every Python file of the project (the walk ``ddp_files`` makes, made once)."""
        return [Path(name) for name, _ in self._python_files()]

    def parsed_holding(self, spellings: Collection[bytes], limit: int) -> list[ast.Module] | None:
        """The parsed Python files of the project whose text holds one of ``spellings`` (a cheap test
        before parsing); None where the project has more than ``limit`` Python files (a collection of
        projects, not read) or one of those files does not parse (what it holds is unknown)."""
        from loopcheck.project.walk import parsed  # (asked by the few readings of the whole project's code)

        files = self.python_files()
        if len(files) > limit:
            return None
        trees = []
        for path in files:
            text = self.text_of(path)
            if any(spelled in text for spelled in spellings):
                tree = parsed(text)
                if tree is None:
                    return None
                trees.append(tree)
        return trees

    def python_stamp(self) -> str:
        """The size and modification time of every Python file of the project, hashed: what a
        cached result that read the whole project's code depends on (a file that starts to pass a
        builder's keyword changes it)."""
        if self._python_stamp is None:
            self._python_stamp = files_stamp(name for name, _ in self._python_files())
        return self._python_stamp

    def _relative(self, path: Path) -> str:
        """``path`` relative to the root, links resolved (a resolve costs a system call per part)."""
        rel = self._relatives.get(path)
        if rel is None:
            rel = self._relatives[path] = real_path(path).relative_to(self.root).as_posix()
        return rel

    def defining(self, path: Path, name: str) -> Path:
        """The module that defines ``name`` imported from ``path``: a package's ``__init__.py`` that
        does not define it but re-exports it from a module of its own (``from .train import Trainer``,
        ``from src.trainer.base_trainer import BaseTrainer``) names that module; ``path`` itself
        otherwise. One hop, text only."""
        if path.name != "__init__.py" or self.may_define(path, name):
            return path
        exported = self._exports.get(path)
        if exported is None:
            exported = self._exports[path] = {
                n.decode(): m.decode() for m, bracketed, names in _REEXPORT.findall(self._text(path))
                if not re.search(rb"\bas\b", bracketed + names) for n in re.findall(rb"\w+", bracketed + names)}
        module = exported.get(name)
        found = self.resolve(path, module.lstrip("."), len(module) - len(module.lstrip("."))) \
            if module is not None else None
        return found if found is not None and self.may_define(found, name) else path

    def may_define(self, path: Path, name: str) -> bool:
        """Whether the text of ``path`` holds ``def name`` or ``class name``: a module that does not
        cannot give facts for ``name`` (read in a thousandth of the time of parsing it)."""
        if not name.isascii():  # `\w` of a bytes pattern is ASCII: the token list cannot hold it
            return re.search(rb"\b(?:def|class)\s+" + re.escape(name.encode()) + rb"\b", self._text(path)) is not None
        names = self._defines.get(path)
        if names is None:
            text = self._text(path)
            names = self._defines[path] = frozenset(_DEFINES[0].findall(text)) | frozenset(_DEFINES[1].findall(text))
        return name.encode() in names

    def defined(self, path: Path) -> set[str]:
        """The names the ``def`` statements in the text of ``path`` define (at any depth)."""
        return {name.decode() for name in _DEFS.findall(self._text(path))}

    def class_bases(self, path: Path, name: str) -> str | None:
        """The text between the parentheses of the top-level ``class name(...):`` of ``path`` ("" for
        ``class name:``); None where the text defines no such class."""
        return class_bases(self._text(path).decode("utf-8", "replace"), name) if self.may_define(path, name) else None

    def mentions(self, path: Path, text: str) -> bool:
        return text.encode() in self._text(path)

    def _text(self, path: Path) -> bytes:
        text = self._texts.get(path)
        if text is None:
            try:
                text = path.read_bytes() if path.stat().st_size <= _MAX_BYTES else b""
            except OSError:
                text = b""
            if len(self._texts) >= _KEEP_TEXTS:
                del self._texts[next(iter(self._texts))]  # the oldest: the index lives for the whole run
            self._texts[path] = text
        return text

    def resolve(self, importer: Path, module: str, level: int) -> Path | None:
        """The project file ``from <module> import ...`` (or ``import <module>``) names in ``importer``."""
        asked = (importer, module, level)
        if asked not in self._resolved_from:
            key = (str(importer.parent), module, level)  # the files of one directory share it
            if key not in self._resolved:
                self._resolved[key] = self._resolve(importer, module, level)
            self._resolved_from[asked] = self._resolved[key]
        return self._resolved_from[asked]

    def _resolve(self, importer: Path, module: str, level: int) -> Path | None:
        parts = [p for p in module.split(".") if p]
        if level:
            base = self._directory(importer)
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            bases = [self._directory(importer), self.root, self._src]
        for base in bases:
            found = self._in_base(base, parts)
            if found is not None:
                return found
        if not level:
            # a project in a folder of the checkout, run from there (`cd edm; python train.py`, EDM's
            # `training/training_loop.py` importing `torch_utils` of `edm/`): the folders between the
            # importer's and the root, nearest first, after the root itself
            for base in self._between(bases[0]):
                found = self._in_base(base, parts)
                if found is not None:
                    return found
        if not level and len(parts) > 1 and parts[0] == self.root.name:
            # a repository that is itself the package, run from the directory above it
            # (`from mae_st.engine_pretrain import ...` inside the checkout `mae_st/`)
            return self._resolve(self.root / "__init__.py", ".".join(parts[1:]), 1)
        return None

    def _between(self, directory: Path) -> list[Path]:
        """The folders above ``directory`` and below the root, nearest first (none outside the root)."""
        key = str(directory)
        found = self._above.get(key)
        if found is None:
            found = self._above[key] = []
            if key.startswith(f"{self.root}{os.sep}"):
                parent = directory.parent
                while parent != self.root and len(str(parent)) > len(str(self.root)):
                    found.append(parent)
                    parent = parent.parent
        return found

    def _in_base(self, base: Path, parts: list[str]) -> Path | None:
        """The project file the module ``parts`` names in the directory ``base``, if any (asked
        again for each directory of importers: the project root is a base of every import)."""
        key = (str(base), *parts)
        if key not in self._in_bases:
            self._in_bases[key] = None
            # Most imports name a library (torch, numpy): the listing of the base rules them out
            # without a stat per candidate.
            names = self._listing(base)
            first = {parts[0], f"{parts[0]}.py"} if parts else {"__init__.py"}
            if not names.isdisjoint(first):
                target = base.joinpath(*parts) if parts else base
                for candidate in (target.with_suffix(".py") if parts else None, target / "__init__.py"):
                    if candidate is not None and candidate.is_file() and self._inside(candidate):
                        self._in_bases[key] = candidate
                        break
        return self._in_bases[key]

    def _directory(self, importer: Path) -> Path:
        key = str(importer)
        if key not in self._directories:
            self._directories[key] = real_path(importer).parent
        return self._directories[key]

    def _listing(self, directory: Path) -> frozenset[str]:
        key = str(directory)
        if key not in self._listings:
            try:
                self._listings[key] = frozenset(os.listdir(directory))
            except OSError:
                self._listings[key] = frozenset()
        return self._listings[key]

    def _inside(self, path: Path) -> bool:
        try:
            real_path(path).relative_to(self.root)
        except ValueError:
            return False
        return True

    # -- entry scripts -----------------------------------------------------------------------
    def ddp_files(self) -> list[ModuleFacts]:
        """Facts of every project file that builds a DistributedDataParallel wrapper itself (none
        where the root holds more files than one project does)."""
        if self._ddp_files is None:
            self._ddp_files = []
            files = self._python_files()
            if len(files) > _MAX_WALKED:
                return self._ddp_files
            # in the walk's order: the facts of a file outlined before (they say whether it wraps),
            # or the path of one whose text builds a wrapper, to be read
            wrapping: list[ModuleFacts | str] = []
            for name, rel in files:
                try:
                    st = os.stat(name)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # a FIFO, socket or device: reading it could block
                entry = self.entries.get(rel)
                fresh = entry is not None and entry[0] == st.st_size and entry[1] == st.st_mtime_ns
                if fresh and entry[2] is None:
                    continue  # known not to mention DDP
                # facts read by name only (another file's lookup) say nothing of the module's DDP
                # wraps: test its text before reading its outline, as for a file not read at all
                if not fresh or not (isinstance(entry[2], dict) and entry[2].get("outlined", True)):
                    try:
                        with open(name, "rb") as file:
                            text = file.read() if st.st_size <= _MAX_BYTES else b""
                    except OSError:
                        continue
                    # two substring tests rule out most files faster than the pattern can
                    if not (b"DDP" in text or b"DistributedDataParallel" in text) or not _DDP_CALL.search(text):
                        if not fresh:
                            self._put(rel, [st.st_size, st.st_mtime_ns, None])
                        continue
                    wrapping.append(name)
                elif (found := self.facts(Path(name), functions=False)) is not None and found.ddp_lines:
                    wrapping.append(found)
            if len(wrapping) <= _MAX_DDP_FILES:
                self._ddp_files = [found for item in wrapping if (found := item if isinstance(item, ModuleFacts)
                                   else self.facts(Path(item), functions=False)) is not None and found.ddp_lines]
        return self._ddp_files

    def _python_files(self) -> list[tuple[str, str]]:
        """(path, path relative to the root with "/") of each Python file of the project; the walk
        stops once it has found more than ``_MAX_WALKED``."""
        if self._files is not None:
            return self._files
        found: list[tuple[str, str]] = []
        root = str(self.root)
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS and not d.startswith("."))
            rel = os.path.relpath(directory, root).replace(os.sep, "/")
            prefix = "" if rel == "." else f"{rel}/"
            found.extend((os.path.join(directory, f), f"{prefix}{f}") for f in sorted(files) if f.endswith(".py"))
            self._walked.append((directory, files))  # sorted through only where ``documents`` asks
            if len(found) > _MAX_WALKED:
                break
        self._files = found
        return found

    def documents(self) -> list[str] | None:
        """The configuration files, scripts and documents of the project (YAML, JSON, TOML, INI, gin,
        ``*.sh``, Slurm jobs, Makefiles, Markdown, notebooks, ``README*``), found in the walk of
        ``python_files``; None where the walk stopped early (a collection of projects, not one)."""
        if len(self._python_files()) > _MAX_WALKED:
            return None
        if self._documents is None:
            self._documents = [os.path.join(directory, name) for directory, names in self._walked
                               for name in sorted(names) if _is_document(name)]
        return self._documents

    # -- disk cache --------------------------------------------------------------------------
    def _put(self, rel: str, entry: list[object]) -> None:
        self.entries[rel] = self.fresh[rel] = entry
        self.dirty = True

    def take_fresh(self) -> dict[str, list[object]]:
        """The entries read since the last call (a worker's, for the process that saves them)."""
        fresh, self.fresh = self.fresh, {}
        return fresh

    def merge(self, entries: dict[str, list[object]]) -> None:
        """Entries another process read. For the same version of a file, facts beat a "no DDP"
        mark, all of a module's facts beat some, and facts with its imports beat those without."""
        for rel, entry in entries.items():
            old = self.entries.get(rel)
            if old is not None and old[:2] == entry[:2] and _richness(old) >= _richness(entry):
                continue
            self.entries[rel] = entry
            self.dirty = True

    def _load(self) -> dict[str, list[object]]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("root") != str(self.root):
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def save(self) -> None:
        if self.cache_file is None or not self.dirty:
            return
        import tempfile  # (with ``random``) only where something is written

        text = json.dumps({"format": _FORMAT, "root": str(self.root), "entries": self.entries}, separators=(",", ":"))
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_file.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.cache_file)
            self.dirty = False
        except OSError:
            self.cache_file = None  # read-only: run on without it


_DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json", ".jsonnet", ".libsonnet", ".toml", ".cfg", ".ini", ".conf", ".gin",
                      ".env", ".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".job", ".pbs", ".bat", ".cmd", ".ps1",
                      ".mk", ".md", ".rst", ".ipynb")


def _is_document(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(_DOCUMENT_SUFFIXES) or lower.startswith(("readme", "makefile", "dockerfile"))


def _richness(entry: list[object]) -> int:
    facts = entry[2]
    if not isinstance(facts, dict):
        return 0
    # the returned calls first: read for the few files that call a DDP helper, on every run if lost
    return 1 + 4 * (facts.get("returned_calls") is not None) + 2 * bool(facts.get("complete", True)) \
        + bool(facts.get("outlined", True))


@cache  # a few per repository; a worker checks files of every project in turn
def project_index(root: Path, cache_dir: Path | None) -> ProjectIndex:
    return ProjectIndex(root, cache_dir)


def forget() -> None:
    """Drop what this module keeps between files (indexes, project roots, parsed modules): a new run
    reads the files again, and a marker file may have been added."""
    project_index.cache_clear()
    _root_of.cache_clear()
    marked_folder.cache_clear()
    _REAL.clear()
    _READERS.clear()
