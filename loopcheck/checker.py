"""``loopcheck check``: configuration, file discovery, checking (in worker processes), output.

Files are read and pre-filtered in this process (a substring test, microseconds a file); only the
few that can hold a training loop are looked up in the result cache (``loopcheck.cache``) and, when
not cached, checked in worker processes (``loopcheck.workers``), so that a file that crashes the
parser, hangs it or trips a bug gets a finding of its own and the others are still checked. Output
goes to stdout or ``--output-file``; ``--baseline`` drops findings recorded by ``--write-baseline``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from loopcheck import baseline
from loopcheck.catalog import FILE_CODES, INVALID_SUPPRESSION, NOT_ANALYSED, SYNTAX_ERROR
from loopcheck.config import Config, ConfigError, Options, find_pyproject, load
from loopcheck.discovery import Discovered, PathError, compile_patterns, discover
from loopcheck.engine import LazyProject, TextTest, check_text, not_analysed, read_source, text_tests, wanted
from loopcheck.findings import Finding
from loopcheck.output import render, statistics, summary
from loopcheck.progress import Progress
from loopcheck.selection import SelectorError, resolve
from loopcheck.suppression import unknown_codes
from loopcheck.terminal import Style

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Callable

    from pathspec import PathSpec

    from loopcheck.cache import Cache
    from loopcheck.workers import Pool

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
T = TypeVar("T")
# Longer than any real file takes (the longest of 10,000 files of 46 ML repositories: a few
# seconds): only a parser that hangs reaches it.
FILE_TIME_LIMIT_S = 60.0


def run_check(args: argparse.Namespace) -> int:
    try:
        config = _config(args)
        codes = _codes(args, config)
        if args.stdin_filename is not None or Path("-") in args.paths:
            if any(path != Path("-") for path in args.paths):
                raise PathError("standard input (`-` or --stdin-filename) is checked alone: give no other PATH")
            if args.write_baseline is not None or args.baseline is not None:
                raise PathError("--baseline and --write-baseline need files, not standard input")
            return _check_stdin(args, config, codes)
        paths = args.paths or [Path(".")]
        found = discover(paths, config.root, config.exclude + config.extend_exclude, config.respect_gitignore)
        for option, target in (("--output-file", args.output_file), ("--write-baseline", args.write_baseline)):
            if target is not None and not target.parent.is_dir():
                raise PathError(f"{option} {target}: directory {target.parent} does not exist")
        if args.jobs is not None and args.jobs < 1:
            raise PathError(f"--jobs must be at least 1, not {args.jobs}")
    except (ConfigError, SelectorError, PathError) as error:
        print(f"loopcheck: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    # Like ruff: a path that does not exist is reported, the others are still checked, and the
    # run ends with exit 2 whatever was found.
    for path in found.missing:
        print(f"loopcheck: error: {path}: no such file or directory", file=sys.stderr)
    for path in found.special:
        print(f"loopcheck: warning: {path}: not a regular file or directory, skipped", file=sys.stderr)
    try:
        status = _run(args, config, codes, found)
    except baseline.BaselineError as error:
        print(f"loopcheck: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_ERROR if found.missing else status


def _run(args: argparse.Namespace, config: Config, codes: frozenset[str], found: Discovered) -> int:
    # A broken baseline fails before the work (and before --output-file is truncated).
    known = baseline.read(args.baseline) if args.baseline is not None and args.write_baseline is None else None
    if args.output_file is None or args.write_baseline is not None:  # a baseline run reports nothing
        return _report(args, config, codes, found, known, sys.stdout)
    try:
        with open(args.output_file, "w", encoding="utf-8", newline="") as out:
            return _report(args, config, codes, found, known, out)
    except OSError as error:
        print(f"loopcheck: error: cannot write {args.output_file}: {error.strerror or error}", file=sys.stderr)
        return EXIT_ERROR


def _report(args: argparse.Namespace, config: Config, codes: frozenset[str], found: Discovered,
            known: Counter[baseline.Key] | None, out: TextIO) -> int:
    files, fixed = found.files, 0
    fixes = None
    cache = None if args.no_cache else _open_cache(config)
    if args.fix or args.diff:
        from loopcheck.fixer import fix_files

        fixes = fix_files(files, codes, config, write=args.fix and not args.diff, unsafe=args.unsafe_fixes,
                          jobs=args.jobs, cache=cache)
        fixed = fixes.applied
        if not args.quiet:
            fixes.write_not_applied()
        if args.diff:
            out.write("".join(fixes.diffs))
            if not args.quiet:
                sys.stderr.write(f"Would fix {fixed} problem{'s' if fixed != 1 else ''}.\n")
            return EXIT_FINDINGS if fixes.diffs and not args.exit_zero else EXIT_OK
    findings = check_files(files, codes, config, jobs=args.jobs, cache=cache, known=fixes.known if fixes else None)
    if args.write_baseline is not None:
        count = baseline.write(args.write_baseline, findings)
        if not args.quiet:
            sys.stderr.write(f"Wrote {count} finding{'s' if count != 1 else ''} to baseline {args.write_baseline}.\n")
        return EXIT_OK
    if known is not None:
        new = baseline.filter_new(findings, known, args.baseline.parent)
        hidden = len(findings) - len(new)
        if hidden and not args.quiet:
            sys.stderr.write(f"{hidden} finding{'s' if hidden != 1 else ''} hidden by baseline {args.baseline}.\n")
        findings = new
    checked = [_display(f) for f in files] if args.output_format == "junit" else []
    fmt = "full" if args.output_format == "text" else args.output_format
    out.write(render(findings, fmt, args.show_source, files=checked, options=config.options,
                     style=Style.for_stream(out, args.color), show_fixes=args.show_fixes))
    if fmt in ("full", "concise"):
        if args.statistics:
            out.write(statistics(findings))
        if not args.quiet:
            out.write(summary(findings, len(files), fixed, missing=len(found.missing)))
    elif args.statistics:
        sys.stderr.write(statistics(findings))
    problems = [f for f in findings if f.code != NOT_ANALYSED.code]  # a notice about loopcheck fails nothing
    return EXIT_FINDINGS if problems and not args.exit_zero else EXIT_OK


def _check_stdin(args: argparse.Namespace, config: Config, codes: frozenset[str]) -> int:
    """An editor's buffer on standard input, reported as ``--stdin-filename`` (else ``-``), with
    that file's per-file ignores. With ``--fix`` the fixed code goes to stdout and what is left
    to stderr; with ``--diff`` the diff goes to stdout."""
    import io
    import tokenize

    path = Path(args.stdin_filename or "-")
    name = _display(path) if args.stdin_filename else "-"
    data = sys.stdin.buffer.read()
    try:
        source = data.decode(tokenize.detect_encoding(io.BytesIO(data).readline)[0])
    except (UnicodeDecodeError, SyntaxError) as error:
        findings = [_unreadable(name, f"cannot decode standard input: {error}")]
    else:
        file_codes = codes - _ignored(path, config.root, _per_file_ignores(config))
        if args.fix or args.diff:
            return _fix_stdin(args, source, name, file_codes, config)
        findings = _invalid_suppressions(name, source)
        if wanted(source, text_tests(codes)):
            from loopcheck import workers

            job = (source, name, file_codes, config.options, str(path), None)
            with workers.Pool(_check_job, 1, FILE_TIME_LIMIT_S) as pool:
                for _, result in pool.run([job]):
                    findings += [not_analysed(name, result.reason)] if isinstance(result, workers.Failure) \
                        else result[0]
    findings.sort()
    out = sys.stdout
    fmt = "full" if args.output_format == "text" else args.output_format
    out.write(render(findings, fmt, args.show_source, files=[name], options=config.options,
                     style=Style.for_stream(out, args.color), show_fixes=args.show_fixes))
    if fmt in ("full", "concise") and not args.quiet:
        out.write(summary(findings, 1))
    problems = [f for f in findings if f.code != NOT_ANALYSED.code]
    return EXIT_FINDINGS if problems and not args.exit_zero else EXIT_OK


def _fix_stdin(args: argparse.Namespace, source: str, name: str, codes: frozenset[str], config: Config) -> int:
    import difflib

    from loopcheck.fixer import fix_text

    fixed = fix_text(source, name, codes, args.unsafe_fixes, config.options)
    left = sorted(f for f in fixed.findings if f.code in codes or f.code in FILE_CODES)
    if args.diff:
        sys.stdout.write("".join(difflib.unified_diff(source.splitlines(True), fixed.source.splitlines(True),
                                                      f"a/{name}", f"b/{name}")))
        return EXIT_FINDINGS if fixed.source != source and not args.exit_zero else EXIT_OK
    sys.stdout.write(fixed.source)
    sys.stderr.write(render(left, "concise", style=Style.for_stream(sys.stderr, args.color)))
    problems = [f for f in left if f.code != NOT_ANALYSED.code]
    return EXIT_FINDINGS if problems and not args.exit_zero else EXIT_OK


def _config(args: argparse.Namespace) -> Config:
    path = args.config if args.config is not None else find_pyproject(Path.cwd())
    return load(path, Path.cwd())


def _codes(args: argparse.Namespace, config: Config) -> frozenset[str]:
    if args.select is not None:  # the command line's selection replaces the configured one
        return resolve(args.select, args.ignore, config.extend_select + args.extend_select)
    return resolve(config.select, config.ignore + args.ignore, config.extend_select + args.extend_select)


def _open_cache(config: Config) -> Cache | None:
    from loopcheck.cache import Cache, default_directory

    cache = Cache(default_directory(), config.options)
    return cache if cache.enabled else None


def check_files(files: list[Path], codes: frozenset[str], config: Config, jobs: int | None = None,
                cache: Cache | None = None, known: dict[str, tuple[str, list[Finding]]] | None = None) -> list[Finding]:
    """Findings of ``files``, sorted; ``jobs``: processes (default: one per core, at most 8); ``known``:
    the findings of files already analysed (by ``--fix``), by name, with the text they are for."""
    if not files:
        return []
    size = 1 if len(files) < 2 else jobs or min(_cores(), 8)
    # Computing the pre-filter imports every rule (and libcst): done here, before any worker is
    # forked, the workers inherit them instead of importing them again.
    tests = cache.text_tests(codes, lambda: _imported(text_tests)(codes)) if cache else _imported(text_tests)(codes)
    pools: list[Pool] = []

    def start() -> None:
        """A worker for each file to check, up to ``size``, started as soon as that file is read: it
        imports what checking needs while this process reads the rest. A run whose files are all
        cached starts none (nor imports ``multiprocessing``: a sixth of such a run)."""
        from loopcheck import workers

        if not pools:
            pools.append(workers.Pool(_check_job, size, FILE_TIME_LIMIT_S, warm=lambda: _warm(codes), start=1))
        else:
            pools[0].grow()

    try:
        findings, todo, keys = _read(files, codes, config, cache, tests, known, start)
        if todo:
            from loopcheck import workers

            progress = Progress(len(todo))
            # Biggest files first, so no worker is left with a big file at the end; a worker keeps
            # to one project while it has files to check, reading the project's facts once.
            order = sorted(range(len(todo)), key=lambda i: -len(todo[i][0]))
            for i, result in pools[0].run(todo, order, _projects(todo) if len(pools[0].workers) > 1 else None):
                progress.tick()
                if isinstance(result, workers.Failure):
                    findings.append(not_analysed(todo[i][1], result.reason))  # not cached: may pass next time
                    continue
                found, project, facts = result
                if cache is not None:
                    cache.put(keys[i], found, project)
                    _merge_facts(facts)
                findings.extend(found)
            progress.done()
    finally:
        for pool in pools:
            pool.close()
    if cache is not None and "loopcheck.project" in sys.modules:
        sys.modules["loopcheck.project"].save()  # what this process and the workers read, for the next run
    return sorted(findings)  # the same order whatever the processes did


def _projects(todo: list[_Job]) -> list[Path]:
    """The project root of each job's file."""
    from loopcheck.project.index import find_root

    return [find_root(Path(job[4])) for job in todo]


def _imported(then: Callable[[frozenset[str]], T]) -> Callable[[frozenset[str]], T]:
    """``then``, called once the rules, the model and libcst are imported (the code of their
    dataclasses' methods read from ``loopcheck.dataclass_code``'s file, not compiled again)."""
    def call(codes: frozenset[str]) -> T:
        if "loopcheck.positions" not in sys.modules:
            import gc

            from loopcheck import dataclass_code
            from loopcheck.cache_directory import default_directory

            # The imports leave ~45,000 objects for the collector, all alive as long as the
            # process: run every 700 new objects, it walked them again and again for the few
            # reference cycles they leave (2-4% of the instructions of checking one script). They
            # are frozen (never walked again), as a worker freezes what it inherits.
            collecting = gc.isenabled()
            gc.disable()
            try:
                with dataclass_code.cached(default_directory()):
                    import loopcheck.positions  # noqa: F401
                    import loopcheck.rules  # noqa: F401
            finally:
                gc.freeze()
                if collecting:
                    gc.enable()
        return then(codes)

    return call


def _warm(codes: frozenset[str]) -> None:
    """In a worker before its first file: import what checking needs."""
    _imported(text_tests)(codes)  # the rules, the model, libcst


def _merge_facts(facts: object) -> None:
    if facts:
        from loopcheck.project import merge

        merge(facts)  # type: ignore[arg-type]


def _read(files: list[Path], codes: frozenset[str], config: Config, cache: Cache | None, tests: tuple[TextTest, ...],
          known: dict[str, tuple[str, list[Finding]]] | None, found_job: Callable[[], None] | None = None
          ) -> tuple[list[Finding], list[_Job], list[str]]:
    """Findings known without checking (unreadable files, bad suppression codes, cached results),
    the jobs for the other files that can hold something, and their cache keys; ``found_job`` is
    called as each job is found."""
    per_file = _per_file_ignores(config)
    findings: list[Finding] = []
    todo: list[_Job] = []
    keys: list[str] = []
    project_dir = cache.project_directory if cache is not None else None
    if "loopcheck.project" in sys.modules:
        sys.modules["loopcheck.project"].forget()  # files may have changed since an earlier run in this process
    for file in files:
        name = _display(file)
        try:
            source = read_source(file)
        except (UnicodeDecodeError, SyntaxError) as error:
            findings.append(_unreadable(name, f"cannot decode file: {error}"))
            continue
        except OSError as error:
            findings.append(_unreadable(name, f"cannot read file: {error.strerror or error}"))
            continue
        findings.extend(_invalid_suppressions(name, source))
        if not wanted(source, tests):
            continue
        if known and name in known and known[name][0] == source:
            findings.extend(known[name][1])
            continue
        file_codes = codes - _ignored(file, config.root, per_file)
        if cache is not None:
            key = cache.key(name, file_codes, source)
            # valid while the facts of the project modules it used are the same (a DDP wrap elsewhere)
            cached = cache.get(key, name, lambda used, file=file: _project_digest(file, project_dir, used))
            if cached is not None:
                findings.extend(cached)
                continue
            keys.append(key)
        todo.append((source, name, file_codes, config.options, str(file), project_dir))
        if found_job is not None:
            found_job()
    return findings, todo, keys


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may run on (containers, taskset)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _per_file_ignores(config: Config) -> list[tuple[PathSpec, frozenset[str]]]:
    return [(compile_patterns([pattern]), resolve(selectors, ()))
            for pattern, selectors in config.per_file_ignores.items()]


# source, display name, codes, options, path, project facts cache directory
_Job = tuple[str, str, frozenset[str], Options, str, "Path | None"]


def _check_job(job: _Job) -> tuple[list[Finding], str | None, object]:
    """A file's findings, the digest of the project facts they used (None if none were read), and
    the project facts read for it that were not cached (for the parent to save: ``project.merge``)."""
    source, name, codes, options, path, project_dir = job
    project = LazyProject(path, project_dir)
    findings = check_text(source, name, codes, options, project=project)
    new = None
    if project_dir is not None and "loopcheck.project" in sys.modules:
        new = sys.modules["loopcheck.project"].new_facts()
    return findings, project.digest, new


def _project_digest(file: Path, project_dir: Path | None, used: str | None = None) -> str | None:
    """The digest of the project facts of ``file`` now, of those ``used`` (a cached digest) covers."""
    from loopcheck.project import for_file

    project = for_file(file, project_dir)
    return project.digest(used) if project is not None else None


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
    if not file.is_absolute():  # what it is relative to the working directory (the common case: cheap)
        return file.as_posix()
    try:
        return file.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return file.as_posix()


def _invalid_suppressions(name: str, source: str) -> list[Finding]:
    found = []
    for line, col, token, hint in unknown_codes(source):
        message = f"`{token}` in a suppression comment is not a loopcheck code: it silences nothing"
        if hint:
            message += f" (did you mean `{hint}`?)"
        found.append(Finding(filename=name, line=line, col=col, code=INVALID_SUPPRESSION.code,
                             name=INVALID_SUPPRESSION.name, message=message, severity=INVALID_SUPPRESSION.level.value,
                             end_line=line, end_col=col + len(token), source_line=source.splitlines()[line - 1]))
    return found


def _unreadable(name: str, message: str) -> Finding:
    return Finding(filename=name, line=1, col=1, code=SYNTAX_ERROR.code, name=SYNTAX_ERROR.name, message=message,
                   severity=SYNTAX_ERROR.level.value, end_line=1, end_col=1)
