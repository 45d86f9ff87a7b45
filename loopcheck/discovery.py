"""Which files to check: Python files under the given paths, minus ``.gitignore``d and excluded ones.

Directories are walked without following symbolic links to directories (so a link loop cannot
trap the walk). Files given explicitly are checked unless an exclude pattern matches them, which
is what a pre-commit hook passing file names expects. ``pathspec`` is imported only when there are
patterns to match: a pre-commit run on a few files does not pay for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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
    """A path on the command line that does not exist."""


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


def discover(paths: list[Path], root: Path, exclude: list[str], respect_gitignore: bool = True) -> Iterator[Path]:
    """Files to check, in a stable order, each once."""
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise PathError(f"{path}: no such file or directory")
    filter_ = _Filter(root, exclude)
    seen: set[Path] = set()
    for path in paths:
        found = _walk(path, filter_, respect_gitignore) if path.is_dir() else (
            iter([] if filter_.skip(path, False) else [path]))
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                yield file


def _walk(top: Path, filter_: _Filter, respect_gitignore: bool) -> Iterator[Path]:
    if respect_gitignore:  # .gitignore files above the walked directory, up to the repository root
        for parent in [top.absolute(), *top.absolute().parents]:
            filter_.read_gitignore(parent)
            if (parent / ".git").exists():
                break
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        current = Path(directory)
        if respect_gitignore and current != top:
            filter_.read_gitignore(current)
        dirnames[:] = sorted(d for d in dirnames if not filter_.skip(current / d, True))
        for name in sorted(filenames):
            file = current / name
            if name.endswith(PYTHON_SUFFIXES) and not filter_.skip(file, False):
                yield file
