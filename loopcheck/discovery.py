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
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import PathSpec

# Directories no one wants linted (ruff's defaults).
DEFAULT_EXCLUDE = frozenset({".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox",
                             ".pants.d", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__", "_build",
                             "buck-out", "dist", "node_modules", "venv", "__pycache__"})
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


class _Filter:
    def __init__(self, root: Path, exclude: list[str]) -> None:
        self.root = root.absolute()
        self.exclude = compile_patterns(exclude) if exclude else None
        self.gitignores: list[tuple[Path, PathSpec]] = []

    def skip(self, path: Path, is_dir: bool) -> bool:
        absolute = path.absolute()
        try:
            relative = absolute.relative_to(self.root)
        except ValueError:
            relative = Path(path.name)
        if any(part in DEFAULT_EXCLUDE for part in relative.parts[:-1] if not is_dir) or (
                is_dir and path.name in DEFAULT_EXCLUDE):
            return True
        suffix = "/" if is_dir else ""
        if self.exclude is not None and (self.exclude.match_file(relative.as_posix() + suffix)
                                         or self.exclude.match_file(path.name + suffix)):
            return True
        for base, spec in self.gitignores:
            try:
                inside = absolute.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(inside + suffix):
                return True
        return False

    def read_gitignore(self, directory: Path) -> None:
        file = directory / ".gitignore"
        if file.is_file():
            try:
                lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                return
            self.gitignores.append((directory.absolute(), compile_patterns(lines)))


def discover(paths: list[Path], root: Path, exclude: list[str], respect_gitignore: bool = True) -> Discovered:
    """The files to check under ``paths``, and the given paths that could not be used."""
    found = Discovered()
    filter_ = _Filter(root, exclude)
    seen: set[Path] = set()
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:  # missing, a dangling link, or no permission to look
            found.missing.append(path)
            continue
        if stat.S_ISDIR(mode):
            candidates: Iterator[Path] = _walk(path, filter_, respect_gitignore)
        elif stat.S_ISREG(mode):
            candidates = iter([] if filter_.skip(path, False) else [path])
        else:
            found.special.append(path)
            continue
        for file in candidates:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.files.append(file)
    return found


def _walk(top: Path, filter_: _Filter, respect_gitignore: bool) -> Iterator[Path]:
    if respect_gitignore:  # .gitignore files above the walked directory, up to the repository root
        for parent in [top.absolute(), *top.absolute().parents]:
            filter_.read_gitignore(parent)
            if (parent / ".git").exists():
                break
    stack = [top]
    while stack:  # depth first, files before subdirectories, each level in name order
        current = stack.pop()
        if respect_gitignore and current != top:
            filter_.read_gitignore(current)
        try:
            with os.scandir(current) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue  # an unreadable directory: nothing to check in it
        subdirectories = []
        for entry in listing:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                # is_file(): a regular file or a link to one, never a FIFO, socket or device
                is_python = not is_dir and entry.name.endswith(PYTHON_SUFFIXES) and entry.is_file()
            except OSError:
                continue
            if is_dir:
                subdirectories.append(current / entry.name)
            elif is_python and not filter_.skip(current / entry.name, False):
                yield current / entry.name
        stack.extend(reversed([d for d in subdirectories if not filter_.skip(d, True)]))
