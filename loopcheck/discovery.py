"""Which files to check: Python files under the given paths, minus ``.gitignore``d and excluded ones.

Directories are walked without following symbolic links to directories (so a link loop cannot
trap the walk). Only regular files are checked: a FIFO, socket or device named ``x.py`` would
block or never end a read. Files given explicitly are checked unless an exclude pattern matches
them, which is what a pre-commit hook passing file names expects; a path that does not exist is
recorded and the others are still walked. ``pathspec`` is imported only when there are patterns to
match: a pre-commit run on a few files does not pay for it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from pathspec import PathSpec

# Directories no one wants linted (ruff's defaults).
DEFAULT_EXCLUDE = frozenset({".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
                             ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
                             ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "dist",
                             "node_modules", "site-packages", "venv", "__pycache__"})
PYTHON_SUFFIXES = (".py", ".pyi")


class PathError(ValueError):
    """A command-line argument naming a path that cannot be used."""


@dataclass
class Discovered:
    files: list[Path] = field(default_factory=list)  # in a stable order, each once
    missing: list[Path] = field(default_factory=list)  # given paths that do not exist
    special: list[Path] = field(default_factory=list)  # given paths that are not regular files or directories


def compile_patterns(patterns: list[str]) -> PathSpec:
    """gitignore-style patterns (``pathspec`` renamed the factory in 0.12: accept both)."""
    import pathspec

    try:
        return pathspec.PathSpec.from_lines("gitignore", patterns)
    except (KeyError, LookupError):
        return pathspec.PathSpec.from_lines("gitwildmatch", patterns)


class _LazyPatterns:
    """The patterns of one ``.gitignore``, matched as ``compile_patterns`` would match them (the last
    pattern that matches decides), each compiled only when a path could match it: one that does not
    hold every run of plain text of a pattern (``build`` of ``build/``, ``.pyc`` of ``*.pyc``)
    cannot. Compiling a pattern costs far more than such tests, and most patterns of a project's
    ``.gitignore`` files (``*.log``, ``.DS_Store``, ``wandb/``) match none of its Python files or
    directories: compiling and testing them all was an eighth of a run whose results are cached."""

    def __init__(self, lines: list[str]) -> None:
        from pathspec import util

        try:
            factory = util.lookup_pattern("gitignore")
        except (KeyError, LookupError):  # pathspec before 0.12
            factory = util.lookup_pattern("gitwildmatch")
        # [runs of plain text, the expression's text, whether a match ignores, compiled (or None)]
        self.patterns: list[list[object]] = []
        for line in lines:
            if not line:
                continue
            regex, include = factory.pattern_to_regex(line)  # type: ignore[attr-defined]
            if include is not None:  # not a comment or a blank line
                self.patterns.append([_plain_runs(line), regex, include, None])

    def match_file(self, path: str) -> bool:
        ignored = False
        for pattern in self.patterns:
            runs, regex, include, compiled = pattern
            for run in runs:  # type: ignore[attr-defined]
                if run not in path:
                    break
            else:
                if compiled is None:
                    compiled = pattern[3] = re.compile(regex)  # type: ignore[arg-type]
                if compiled.search(path) is not None:  # type: ignore[attr-defined]
                    ignored = include  # type: ignore[assignment]
        return ignored


def _plain_runs(line: str) -> tuple[str, ...]:
    """Texts any path a gitignore ``line`` matches holds: its runs of characters other than
    wildcards and ``/``. None are read from a line with an escape or a character class."""
    text = line.rstrip()
    if "\\" in text or "[" in text:
        return ()
    if text.startswith("!"):
        text = text[1:]
    return tuple(run for run in (part.strip() for part in _WILDCARDS.split(text)) if run.strip("."))


_WILDCARDS = Pattern(r"[*?/]+")


class _Filter:
    """What to skip: default-excluded directories, exclude patterns and ``.gitignore`` files. Paths
    are handled as strings: building ``Path`` objects for each of 10,000 files costs more than the
    tests."""

    def __init__(self, root: Path, exclude: list[str]) -> None:
        self.root = str(root.absolute())
        self.root_prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep
        self.exclude = compile_patterns(exclude) if exclude else None
        self.gitignores: list[_Gitignore] = []  # every one read: for files given by name

    def skip(self, path: Path, is_dir: bool) -> bool:
        """A file given by name (or a directory): tested against every ``.gitignore`` read so far."""
        absolute = str(path.absolute())
        return self.skips(absolute, path.name, is_dir, self.gitignores)

    def skips(self, absolute: str, name: str, is_dir: bool, gitignores: list[_Gitignore]) -> bool:
        """Whether to skip the file or directory at ``absolute`` (its last part ``name``), given
        the ``gitignores`` that may apply to it."""
        if is_dir and name in DEFAULT_EXCLUDE:
            return True
        relative = absolute[len(self.root_prefix):] if absolute.startswith(self.root_prefix) else None
        if relative is not None and os.sep != "/":
            relative = relative.replace(os.sep, "/")
        if not is_dir and relative is not None and any(part in DEFAULT_EXCLUDE for part in relative.split("/")[:-1]):
            return True
        suffix = "/" if is_dir else ""
        if self.exclude is not None and ((relative is not None and self.exclude.match_file(relative + suffix))
                                         or self.exclude.match_file(name + suffix)):
            return True
        for base, spec in gitignores:
            if absolute.startswith(base):
                inside = absolute[len(base):]
                if spec.match_file((inside.replace(os.sep, "/") if os.sep != "/" else inside) + suffix):
                    return True
        return False

    def read_gitignore(self, directory: str) -> _Gitignore | None:
        """The ``.gitignore`` of ``directory`` (an absolute path), if it has one."""
        file = os.path.join(directory, ".gitignore")
        if not os.path.isfile(file):
            return None
        try:
            with open(file, encoding="utf-8", errors="replace") as lines:
                spec = _LazyPatterns(lines.read().splitlines())
        except OSError:
            return None
        read = (directory if directory.endswith(os.sep) else directory + os.sep, spec)
        self.gitignores.append(read)
        return read


# A directory (absolute, ending in a separator) and its .gitignore's patterns.
_Gitignore = tuple[str, _LazyPatterns]


def discover(paths: list[Path], root: Path, exclude: list[str], respect_gitignore: bool = True) -> Discovered:
    """The files to check under ``paths``, and the given paths that could not be used."""
    found = Discovered()
    filter_ = _Filter(root, exclude)
    seen: set[str] = set()
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:  # missing, a dangling link, or no permission to look
            found.missing.append(path)
            continue
        if stat.S_ISDIR(mode):
            candidates: Iterator[tuple[Path, str]] = _walk(path, filter_, respect_gitignore)
        elif stat.S_ISREG(mode):
            candidates = iter([] if filter_.skip(path, False) else [(path, os.path.realpath(path))])
        else:
            found.special.append(path)
            continue
        for file, key in candidates:  # each file once, however it was reached (links, paths given twice)
            if key not in seen:
                seen.add(key)
                found.files.append(file)
    return found


def _walk(top: Path, filter_: _Filter, respect_gitignore: bool) -> Iterator[tuple[Path, str]]:
    """The Python files under ``top``, each with its real path (``os.path.realpath``). A
    ``.gitignore`` applies to the directory it is in and everything below it, so each directory is
    tested against those of its ancestors only (up to the repository root above ``top``), not
    those of its siblings."""
    top_absolute = str(top.absolute())
    # those of another walked path that hold this one still apply
    gitignores = [read for read in filter_.gitignores if (top_absolute + os.sep).startswith(read[0])]
    if respect_gitignore:  # .gitignore files above the walked directory, up to the repository root
        parent = top_absolute
        while True:
            read = filter_.read_gitignore(parent)
            if read is not None:
                gitignores.append(read)
            if os.path.exists(os.path.join(parent, ".git")):
                break
            up = os.path.dirname(parent)
            if up == parent:
                break
            parent = up
    # (path, its absolute path, the .gitignores of it and its ancestors)
    stack = [(top, top_absolute, gitignores)]
    while stack:  # depth first, files before subdirectories, each level in name order
        current, absolute, gitignores = stack.pop()
        if respect_gitignore and current != top:
            read = filter_.read_gitignore(absolute)
            if read is not None:
                gitignores = [*gitignores, read]
        try:
            with os.scandir(current) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue  # an unreadable directory: nothing to check in it
        subdirectories = []
        real = None  # the directory's real path: that of each file in it but a link (a system call per part)
        for entry in listing:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                # is_file(): a regular file or a link to one, never a FIFO, socket or device
                is_python = not is_dir and entry.name.endswith(PYTHON_SUFFIXES) and entry.is_file()
                is_link = is_python and entry.is_symlink()
            except OSError:
                continue
            if is_dir:
                subdirectories.append(entry.name)
            elif is_python and not filter_.skips(file := os.path.join(absolute, entry.name), entry.name, False,
                                                 gitignores):
                if is_link:
                    yield current / entry.name, os.path.realpath(file)
                else:
                    real = real or os.path.realpath(absolute)
                    yield current / entry.name, os.path.join(real, entry.name)
        stack.extend(reversed([(current / name, path, gitignores) for name in subdirectories
                               if not filter_.skips(path := os.path.join(absolute, name), name, True, gitignores)]))
