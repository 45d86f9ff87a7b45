"""Which files to check: Python files under the given paths, minus ``.gitignore``d and excluded ones.

Directories are walked without following symbolic links to directories (so a link loop cannot
trap the walk); files given explicitly are always checked unless an ``exclude`` pattern matches
them, which is what a pre-commit hook passing file names expects.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pathspec

# Directories no one wants linted (ruff's defaults).
DEFAULT_EXCLUDE = [".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox", ".pants.d",
                   ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__", "_build", "buck-out",
                   "dist", "node_modules", "venv", "__pycache__"]
PYTHON_SUFFIXES = (".py", ".pyi")


class PathError(ValueError):
    """A path on the command line that does not exist."""


def compile_patterns(patterns: list[str]) -> pathspec.PathSpec:
    """gitignore-style patterns (``pathspec`` renamed the factory in 0.12: accept both)."""
    try:
        return pathspec.PathSpec.from_lines("gitignore", patterns)
    except (KeyError, LookupError):
        return pathspec.PathSpec.from_lines("gitwildmatch", patterns)


def discover(paths: list[Path], root: Path, exclude: list[str], respect_gitignore: bool = True) -> Iterator[Path]:
    """Files to check, in a stable order, each once."""
    excluded = compile_patterns(DEFAULT_EXCLUDE + exclude)
    seen: set[Path] = set()
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise PathError(f"{path}: no such file or directory")
    for path in paths:
        if path.is_dir():
            found = _walk(path, root, excluded, respect_gitignore)
        else:
            found = iter([] if _skip(path, False, root, excluded, []) else [path])
        for file in found:
            key = file.resolve() if file.exists() else file
            if key not in seen:
                seen.add(key)
                yield file


def _walk(top: Path, root: Path, excluded: pathspec.PathSpec, respect_gitignore: bool) -> Iterator[Path]:
    gitignores: list[tuple[Path, pathspec.PathSpec]] = []
    if respect_gitignore:
        for parent in [top.resolve(), *top.resolve().parents]:
            gitignores.extend(_gitignore(parent))
            if (parent / ".git").exists():
                break
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        current = Path(directory)
        if respect_gitignore:
            gitignores.extend(_gitignore(current.resolve()) if current != top else [])
        dirnames[:] = sorted(d for d in dirnames if not _skip(current / d, True, root, excluded, gitignores))
        for name in sorted(filenames):
            file = current / name
            if name.endswith(PYTHON_SUFFIXES) and not _skip(file, False, root, excluded, gitignores):
                yield file


def _gitignore(directory: Path) -> list[tuple[Path, pathspec.PathSpec]]:
    file = directory / ".gitignore"
    if not file.is_file():
        return []
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [(directory, compile_patterns(lines))]


def _skip(path: Path, is_dir: bool, root: Path, excluded: pathspec.PathSpec,
          gitignores: list[tuple[Path, pathspec.PathSpec]]) -> bool:
    suffix = "/" if is_dir else ""
    absolute = path.absolute()
    try:
        relative = absolute.relative_to(root.absolute()).as_posix()
    except ValueError:
        relative = path.name
    if excluded.match_file(relative + suffix) or excluded.match_file(path.name + suffix):
        return True
    for base, spec in gitignores:
        try:
            inside = absolute.resolve().relative_to(base).as_posix() if not path.is_symlink() else \
                absolute.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(inside + suffix):
            return True
    return False
