"""The ``loopcheck`` command: ``check`` (static), ``run`` (runtime), ``rule`` and ``rules`` (docs).

Exit codes follow ruff: 0 no findings, 1 findings, 2 usage, configuration or path error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from loopcheck import __version__
from loopcheck.terminal import CHOICES

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

_DESCRIPTION = """\
loopcheck finds silent bugs in PyTorch training loops: gradients zeroed inside an accumulation
window, an un-divided accumulated loss, schedulers or EMA ticking per micro-batch, clipping of
partial sums, steps at the wrong nesting level. The same rule codes (LC101, ...) are reported
statically by `check` and from a real run by `run`.
"""

_CHECK_EPILOG = """\
selectors: a code (LC101), a prefix (LC1 = all accumulation rules, ALL) or a rule name
(zero-grad-in-accumulation). Configure defaults in pyproject.toml under [tool.loopcheck]
(select, ignore, extend-select, per-file-ignores, exclude, extend-exclude, respect-gitignore,
lr-scaling).
Silence one finding with `# noqa: LC101` (or bare `# noqa`, or `# loopcheck: ignore[LC101]`)
on the flagged line or the first line of its statement.

adopting on an existing repository: `loopcheck check --write-baseline loopcheck-baseline.json`
once, then `loopcheck check --baseline loopcheck-baseline.json` reports only new findings.

which files are parsed: only those whose text mentions a training loop's call (`backward(`,
`loss_scaler(`, `self.training_step(`) or, for LC206, `cuda.amp` / `torch.cuda import`; a syntax error in one of them is
LC000, other files are not parsed (README: "Which files are parsed"). LC001: a file loopcheck could
not analyse (it says why; never fails the run). LC002: an unknown code in a suppression comment.

exit status: 0 no findings, 1 findings, 2 usage, configuration or path error (a missing PATH is
reported and the other paths are still checked).
"""

_RUN_EPILOG = """\
loopcheck's options come before SCRIPT; everything after SCRIPT is the script's own
(`loopcheck run -q train.py --lr 3e-4`). The findings use the codes of `loopcheck check`
(`loopcheck rule LC101` explains one).

on several processes: `torchrun --nproc_per_node=8 --no-python loopcheck run --report r.json train.py`
checks every rank; each writes a part and rank 0 merges them into r.json.

exit status: the script's own, with its output and traceback untouched; 2 when SCRIPT does not exist
or an option is wrong; with --fail-on, 1 when the script succeeded but loopcheck found something at
that level or above.
A script that never imports torch runs exactly as under python; without torch installed, the
script's ImportError is followed by one line, `loopcheck: nothing to check: torch is not installed`.
"""


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``run``'s own options are added only when ``command`` is ``run`` (they live
    with the runtime checker, which `check` should not pay to import)."""
    parser = argparse.ArgumentParser(prog="loopcheck", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"loopcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="statically check training code (pre-commit, CI)",
                           description="Check Python files for training-loop pitfalls without running them.",
                           epilog=_CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="files or directories to check (default: the current directory)")
    check.add_argument("--select", type=_csv, metavar="RULES", help="check only these rules (comma-separated; replaces the configured selection)")
    check.add_argument("--ignore", type=_csv, default=[], metavar="RULES", help="do not check these rules")
    check.add_argument("--extend-select", type=_csv, default=[], metavar="RULES",
                       help="check these rules on top of the selection (e.g. opt-in ones)")
    check.add_argument("--output-format", choices=("full", "concise", "json", "sarif", "github", "junit", "text"),
                       default="full", metavar="FORMAT",
                       help="full (default: each finding with its source line and the address of the rule's "
                            "page), concise (one line per finding), json for tools, sarif for code scanning, "
                            "github for pull-request annotations, junit for CI test reports; text is full")
    check.add_argument("--show-fixes", action="store_true",
                       help="under each finding that has a fix, say what --fix would change")
    check.add_argument("--color", choices=CHOICES, default="auto",
                       help="colour the full and concise formats: auto (default: on a terminal, unless NO_COLOR "
                            "is set; FORCE_COLOR forces it), always, never")
    check.add_argument("--output-file", "-o", type=Path, metavar="PATH", help="write the report to PATH, not stdout")
    check.add_argument("--baseline", type=Path, metavar="FILE",
                       help="report only findings that FILE (from --write-baseline) does not record")
    check.add_argument("--write-baseline", type=Path, metavar="FILE",
                       help="record the current findings in FILE and exit 0 (adopt loopcheck, then gate new ones)")
    check.add_argument("--no-cache", action="store_true",
                       help="neither read nor write the result cache ($LOOPCHECK_CACHE_DIR, else "
                            "$XDG_CACHE_HOME/loopcheck, else ~/.cache/loopcheck)")
    check.add_argument("--jobs", "-j", type=int, metavar="N",
                       help="check files in N processes (default: one per core, at most 8)")
    check.add_argument("--fix", action="store_true", help="apply safe fixes in place, then report what is left")
    check.add_argument("--diff", action="store_true",
                       help="print the fixes as a unified diff instead of writing them (exit 1 if there are any)")
    check.add_argument("--unsafe-fixes", action="store_true",
                       help="also apply fixes that may change behaviour beyond the finding")
    check.add_argument("--statistics", action="store_true", help="print the number of findings per rule")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--no-show-source", dest="show_source", action="store_false",
                       help="one line per finding (as --output-format concise)")
    check.add_argument("--stdin-filename", metavar="PATH",
                       help="read the code from standard input (also with PATH `-`) and report it as PATH: "
                            "its configuration and per-file ignores apply (for editors)")
    check.add_argument("--config", type=Path, metavar="PYPROJECT",
                       help="use this pyproject.toml (default: the nearest one with [tool.loopcheck])")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")

    run = sub.add_parser("run", help="run a training script under the runtime checker",
                         description="Run SCRIPT as `python SCRIPT ARGS` would, with loopcheck's runtime "
                                     "checks installed, and report what actually happened.",
                         epilog=_RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    if command == "run":
        from loopcheck.runtime.command import add_run_arguments  # argparse only: no torch yet

        add_run_arguments(run)

    report = sub.add_parser("report", help="show a saved runtime report, write its HTML page, merge rank parts",
                            description="Work with the JSON reports of `loopcheck run --report PATH`.")
    if command == "report":
        from loopcheck.report.commands import add_arguments  # show, html, merge

        add_arguments(report)
    rule = sub.add_parser("rule", help="show the documentation of one rule",
                          description="Print a rule's page: what it finds, why it matters, an example and "
                                      "the correct code.")
    rule.add_argument("rule", metavar="RULE", help="a code (LC101) or name (zero-grad-in-accumulation)")
    rules = sub.add_parser("rules", help="list every rule with its level and whether it has a fix",
                           description="List every rule: code, name, level (error, warning, info, opt-in: "
                                       "checked only when selected), whether `check` (static) and `run` "
                                       "(runtime) report it, and whether `check --fix` repairs it.")
    rules.add_argument("--output-format", choices=("text", "json"), default="text",
                       help="text (default) or json (code, name, level, static, runtime, fix, summary, url)")
    return parser


_COMMANDS = ("check", "run", "report", "rule", "rules")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and not argv[0].startswith("-") and argv[0] not in _COMMANDS:
        print(f"loopcheck: error: {_not_a_command(argv[0])}", file=sys.stderr)
        return EXIT_ERROR
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.command == "check":
        from loopcheck.checker import run_check

        return run_check(args)
    if args.command == "run":
        from loopcheck.runtime.command import run_command

        return run_command(args)
    if args.command == "report":
        from loopcheck.report.commands import run as report_command

        return report_command(args)
    if args.command == "rule":
        return _rule(args.rule)
    if args.command == "rules":
        return _rules(args.output_format)
    parser.print_help()
    return EXIT_ERROR


def _not_a_command(word: str) -> str:
    """What to type instead: the first word names the command, and a file there is the commonest slip."""
    import difflib

    if word.endswith("/") or Path(word).is_dir():
        return f"{word!r} is not a command: `loopcheck check {word}` checks the files in it"
    if word.endswith((".py", ".pyi")) or os.sep in word or Path(word).exists():
        return (f"{word!r} is not a command: `loopcheck check {word}` checks it without running it, "
                f"`loopcheck run {word}` runs it under the runtime checker")
    close = difflib.get_close_matches(word, _COMMANDS, n=1)
    return f"unknown command {word!r} " + (f"(did you mean {close[0]!r}?)" if close else
                                           "(commands: " + ", ".join(_COMMANDS) + ")")


def _rule(name: str) -> int:
    from loopcheck.catalog import lookup
    from loopcheck.catalogue_pages import render_page
    from loopcheck.rules import RULES

    info = lookup(name)
    if info is None:
        from loopcheck.selection import did_you_mean

        hint = did_you_mean(name)
        print(f"loopcheck: error: unknown rule {name!r} " + (f"(did you mean {hint!r}?)" if hint else
                                                            "(see `loopcheck rules`)"), file=sys.stderr)
        return EXIT_ERROR
    print(render_page(info.code, RULES.get(info.code)), end="")
    return EXIT_OK


def _rules(fmt: str = "text") -> int:
    from loopcheck.catalog import CODES, FILE_CODES
    from loopcheck.formats import rule_url
    from loopcheck.rules import RULES

    rows = [{"code": code, "name": info.name, "level": info.level.value,
             "static": code in RULES or code in FILE_CODES, "static_opt_in": info.static_opt_in,
             "runtime": info.runtime, "fix": code in RULES and RULES[code].fixable, "summary": info.summary,
             "url": rule_url(code)}
            for code, info in [*FILE_CODES.items(), *CODES.items()]]
    if fmt == "json":
        import json

        print(json.dumps(rows, indent=2))
        return EXIT_OK
    print(f"{'code':<6} {'name':<34} {'level':<8} {'static':<7} {'runtime':<8} fix")
    for row in rows:
        static, runtime, fix = ("yes" if row[key] else "-" for key in ("static", "runtime", "fix"))
        static = "opt-in" if row["static_opt_in"] else static  # on only with --extend-select in `check`
        print(f"{row['code']:<6} {row['name']:<34} {row['level']:<8} {static:<7} {runtime:<8} {fix}")
    return EXIT_OK


def entry() -> None:
    """Console-script entry point."""
    from loopcheck import module_code
    from loopcheck.cache_directory import default_directory

    module_code.install(default_directory())  # where Python keeps no bytecode of loopcheck's modules
    try:
        code = main()
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `loopcheck check | head`: the reader left; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + 13  # killed by SIGPIPE, as other command-line tools report it
    if sys.argv[1:2] == ["check"]:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """Exit without Python's teardown, which frees every object one at a time: after a check
    (libcst's classes, the files read) that took ~0.1 CPU s, a quarter of checking one script. A check
    runs no user code and leaves nothing open; the exit handlers (``module_code``'s) still run."""
    import atexit

    try:
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    atexit._run_exitfuncs()
    os._exit(code)
