"""``loopcheck check``: configuration, file discovery, checking (in parallel for big trees), output.

Files are read and pre-filtered in this process (a substring test, microseconds a file); only the
few that can hold a training loop are parsed, across processes when there are enough of them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.catalog import SYNTAX_ERROR
from loopcheck.config import Config, ConfigError, Options, find_pyproject, load
from loopcheck.discovery import PathError, compile_patterns, discover
from loopcheck.engine import check_text, fix_text, read_source, read_source_and_encoding, required_texts
from loopcheck.findings import Finding
from loopcheck.output import render, statistics, summary
from loopcheck.selection import SelectorError, resolve

if TYPE_CHECKING:
    from pathspec import PathSpec

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_PARALLEL_FROM = 16  # candidate files; below this a second process costs more than it saves


def run_check(args: argparse.Namespace) -> int:
    try:
        config = _config(args)
        codes = _codes(args, config)
        paths = args.paths or [Path(".")]
        files = list(discover(paths, config.root, config.exclude + config.extend_exclude, config.respect_gitignore))
    except (ConfigError, SelectorError, PathError) as error:
        print(f"loopcheck: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    out = sys.stdout
    fixed = 0
    if args.fix or args.diff:
        fixed, diffs = fix_files(files, codes, config, write=args.fix and not args.diff, unsafe=args.unsafe_fixes)
        if args.diff:
            out.write("".join(diffs))
            if not args.quiet:
                sys.stderr.write(f"Would fix {fixed} problem{'s' if fixed != 1 else ''}.\n")
            return EXIT_FINDINGS if diffs and not args.exit_zero else EXIT_OK
    findings = check_files(files, codes, config)
    out.write(render(findings, args.output_format, args.show_source))
    if args.output_format == "text":
        if args.statistics:
            out.write(statistics(findings))
        if not args.quiet:
            out.write(summary(findings, len(files), fixed))
    elif args.statistics:
        sys.stderr.write(statistics(findings))
    return EXIT_FINDINGS if findings and not args.exit_zero else EXIT_OK


def _config(args: argparse.Namespace) -> Config:
    path = args.config if args.config is not None else find_pyproject(Path.cwd())
    return load(path, Path.cwd())


def _codes(args: argparse.Namespace, config: Config) -> frozenset[str]:
    if args.select is not None:  # the command line's selection replaces the configured one
        return resolve(args.select, args.ignore, config.extend_select + args.extend_select)
    return resolve(config.select, config.ignore + args.ignore, config.extend_select + args.extend_select)


def check_files(files: list[Path], codes: frozenset[str], config: Config) -> list[Finding]:
    per_file = _per_file_ignores(config)
    needles = required_texts(codes)
    findings: list[Finding] = []
    jobs: list[tuple[str, str, frozenset[str], Options]] = []
    progress = _Progress(len(files))
    for file in files:
        progress.tick()
        name = _display(file)
        try:
            source = read_source(file)
        except (UnicodeDecodeError, SyntaxError) as error:
            findings.append(_unreadable(name, f"cannot decode file: {error}"))
            continue
        except OSError as error:
            findings.append(_unreadable(name, f"cannot read file: {error.strerror or error}"))
            continue
        file_codes = codes - _ignored(file, config.root, per_file)
        if any(n in source for n in needles):
            jobs.append((source, name, file_codes, config.options))
    progress.done()
    if len(jobs) >= _PARALLEL_FROM and (os.cpu_count() or 1) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(os.cpu_count() or 1, 8)) as pool:
            for result in pool.map(_check_job, jobs, chunksize=max(1, len(jobs) // 32)):
                findings.extend(result)
    else:
        for job in jobs:
            findings.extend(_check_job(job))
    return sorted(findings)


def fix_files(files: list[Path], codes: frozenset[str], config: Config, write: bool,
              unsafe: bool) -> tuple[int, list[str]]:
    """Apply fixes file by file: write them back (``write``) and/or return unified diffs."""
    import difflib

    per_file = _per_file_ignores(config)
    needles = required_texts(codes)
    total, diffs = 0, []
    for file in files:
        try:
            source, encoding = read_source_and_encoding(file)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue  # reported by the check that follows
        if not any(n in source for n in needles):
            continue
        name = _display(file)
        fixed, applied = fix_text(source, name, codes - _ignored(file, config.root, per_file), unsafe,
                                  config.options)
        if not applied:
            continue
        total += applied
        diffs.append("".join(difflib.unified_diff(source.splitlines(True), fixed.splitlines(True),
                                                  f"a/{name}", f"b/{name}")))
        if write:
            file.write_bytes(fixed.encode(encoding))
    return total, diffs


def _per_file_ignores(config: Config) -> list[tuple[PathSpec, frozenset[str]]]:
    return [(compile_patterns([pattern]), resolve(selectors, ()))
            for pattern, selectors in config.per_file_ignores.items()]


def _check_job(job: tuple[str, str, frozenset[str], Options]) -> list[Finding]:
    return check_text(*job)


def _ignored(file: Path, root: Path, per_file: list[tuple[PathSpec, frozenset[str]]]) -> frozenset[str]:
    if not per_file:
        return frozenset()
    try:
        relative = file.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        relative = file.as_posix()
    out: set[str] = set()
    for spec, codes in per_file:
        if spec.match_file(relative) or spec.match_file(file.name):
            out |= codes
    return frozenset(out)


def _display(file: Path) -> str:
    try:
        return file.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return file.as_posix()


def _unreadable(name: str, message: str) -> Finding:
    return Finding(filename=name, line=1, col=1, code=SYNTAX_ERROR.code, name=SYNTAX_ERROR.name, message=message,
                   severity=SYNTAX_ERROR.level.value, end_line=1, end_col=1)


class _Progress:
    """A file counter on stderr, only for long runs on a terminal (never in CI logs or pipes)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.enabled = total >= 500 and sys.stderr.isatty()

    def tick(self) -> None:
        self.count += 1
        if self.enabled and self.count % 100 == 0:
            sys.stderr.write(f"\rloopcheck: read {self.count}/{self.total} files")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 48 + "\r")
            sys.stderr.flush()
