"""``loopcheck run``: run a training script (or module) under the runtime checker, exactly
as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would: same ``sys.argv``, ``__main__``,
``sys.path[0]`` and working directory. The script's exceptions, tracebacks and exit code
are its own; ``--fail-on`` can only turn a successful exit into 1.

Contract for the main CLI: ``add_run_arguments(parser)`` adds the options below to a
subparser and ``run_command(args)`` returns the process exit code."""
from __future__ import annotations

import argparse
import builtins
import importlib.machinery
import importlib.util
import io
import os
import runpy
import signal
import sys
import types
import zipfile
from types import FrameType, TracebackType
from typing import Any

from .project_config import project_config, selection_for

_OWN_FILES = (os.path.dirname(os.path.abspath(__file__)), os.path.abspath(runpy.__file__), "<frozen runpy>")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    # the script's own options follow SCRIPT: no prefix matching, or argparse would read a
    # script's `--output` as an ambiguous `--output-format`/`--output-file` and stop the run
    parser.allow_abbrev = False
    parser.add_argument("--report", metavar="PATH", help="write the JSON report here")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="report only these codes, names or prefixes (comma-separated); "
                             "opt-in codes must be named exactly")
    parser.add_argument("--ignore", action="append", metavar="CODES",
                        help="do not report these codes, names or prefixes")
    parser.add_argument("--fail-on", choices=("never", "warning", "error"), default="never",
                        help="exit 1 when the script succeeded but a finding at or above this "
                             "level was reported (default: never; the exit code is the script's)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only the findings at exit, not the counters")
    parser.add_argument("--html", metavar="PATH",
                        help="also write a self-contained HTML report with plots (opens offline)")
    from loopcheck.report.commands import add_format_arguments
    from loopcheck.terminal import CHOICES

    add_format_arguments(parser)  # --output-format, --output-file/-o: the findings for CI
    parser.add_argument("--color", choices=CHOICES, default="auto",
                        help="colour the summary on stderr (default: on a terminal; NO_COLOR and FORCE_COLOR)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no status line on stderr while the script runs (shown only on a terminal)")
    from .hooks.distributed import add_run_arguments as add_distributed_arguments

    add_distributed_arguments(parser)  # --consistency-every K, --no-consistency-check
    parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                        help="run a library module as a script, like python -m")
    parser.add_argument("script", nargs="?", metavar="SCRIPT", help="the training script")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="arguments passed to the script")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopcheck run", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv))


def run_command(args: argparse.Namespace) -> int:
    if args.module:
        target, argv, is_module = args.module[0], args.module[1:], True
    elif args.script:
        target, argv, is_module = args.script, list(args.args or []), False
    else:
        print("loopcheck run: a SCRIPT or -m MODULE is required", file=sys.stderr)
        return 2
    try:
        config = project_config()
        selection = selection_for(config, args.select, args.ignore)
    except ValueError as exc:  # ConfigError and SelectorError are ValueErrors
        print(f"loopcheck run: {exc}", file=sys.stderr)
        return 2
    if not is_module and not os.path.exists(target):
        print(f"loopcheck run: can't open file {target!r}: No such file or directory", file=sys.stderr)
        return 2
    if is_module and not _module_exists(target):
        print(f"{sys.executable}: No module named {target}", file=sys.stderr)  # as python -m
        return 1

    from loopcheck.report.outputs import Outputs

    from .hooks.distributed import configure as configure_distributed  # consistency options

    configure_distributed(args)
    outputs = Outputs(report=args.report, html=args.html, output_format=args.output_format,
                      output_file=args.output_file, quiet=args.quiet, color=args.color)
    command = ["loopcheck", "run", *sys.argv[2:]] if sys.argv[1:2] == ["run"] else None
    checker = _Checker(selection, config.options.lr_scaling, command, progress=not args.no_progress)
    finished = _Finisher(checker, outputs)
    previous = _install_sigterm(finished)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    code, how = 0, "finished"
    namespace: dict[str, Any] = {}  # the script's globals stay alive until the checks ran, as in Python
    checker.install()
    try:
        _run_target(target, argv, is_module, namespace)
    except SystemExit as exc:
        code, how = _system_exit_code(exc.code), "sys.exit"
    except KeyboardInterrupt as exc:
        _print_traceback(exc)
        finished("KeyboardInterrupt", 128 + signal.SIGINT)
        _die_interrupted()
        raise
    except BaseException as exc:  # noqa: BLE001 - reported exactly as Python would
        code, how = 1, "exception"
        _print_traceback(exc)
    finally:
        finished(how, code)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        sys.argv[:] = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    session = checker.session
    if code == 0 and args.fail_on != "never" and session is not None and any(
            f.at_least(args.fail_on) for f in session.findings.all()):
        return 1
    return code


class _Checker:
    """The session, started when the script first imports torch (an import hook): a script
    that never imports torch runs as plain Python, and loopcheck itself never imports it."""

    def __init__(self, selection: Any, lr_scaling: Any, command: list[str] | None, progress: bool = True) -> None:
        self.selection, self.lr_scaling, self.command = selection, lr_scaling, command
        self.session: Any = None
        self.imports: Any = None
        self.progress: Any = None  # the status line on a terminal (loopcheck.report.progress)
        self.want_progress = progress

    def install(self) -> None:
        from .imports import PostImportHooks

        self.imports = PostImportHooks(on_error=_internal_error)
        self.imports.on_import("torch", self._start)  # at once when torch is already imported
        self.imports.install()

    def _start(self, torch_module: Any) -> None:
        from .session import Session, active_session

        self.imports.remove()
        if active_session() is not None:  # the script runs loopcheck itself (nested run)
            return
        session = Session(self.selection, self.lr_scaling)
        session.command = self.command
        self.session = session.start()
        from loopcheck.report import progress

        if progress.wanted(disabled=not self.want_progress):
            self.progress = progress.RunProgress(session).start()

    def stop(self) -> None:
        if self.imports is not None:
            self.imports.remove()
        if self.progress is not None:
            self.progress.stop()


def _internal_error(part: str, exc: BaseException) -> None:
    line = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    print(f"loopcheck: internal error in {part} ({line}); nothing is checked, training continues",
          file=sys.stderr)


class _Finisher:
    """Stops the session and writes the outputs once, whichever exit path comes first."""

    def __init__(self, checker: _Checker, outputs: Any) -> None:
        self.checker, self.outputs, self.done = checker, outputs, False

    def __call__(self, how: str, code: int | None) -> None:
        if self.done:
            return
        self.done = True
        self.checker.stop()
        session = self.checker.session
        if session is None:
            if not self.outputs.quiet:
                why = "the script never imported torch" if _torch_installed() else "torch is not installed"
                print(f"loopcheck: nothing to check: {why}{'; no report written' if self.outputs.report else ''}",
                      file=sys.stderr)
            return
        session.stop(how, code)
        session.write_outputs(self.outputs)


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _install_sigterm(finish: _Finisher) -> Any:
    """Only when the default action is in place: write the outputs, then die by SIGTERM as
    the script would have. A handler the script installs later replaces this one."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            finish("SIGTERM", 128 + signum)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        return signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        return None


def _run_target(target: str, argv: list[str], is_module: bool, namespace: dict[str, Any]) -> None:
    if is_module:
        sys.argv[:] = [target, *argv]
        sys.path[0] = os.getcwd()
        namespace.update(runpy.run_module(target, run_name="__main__", alter_sys=True))
    else:
        path = os.path.abspath(target)  # Python gives __main__ an absolute __file__
        sys.argv[:] = [target, *argv]
        sys.path[0] = os.path.dirname(path)
        if os.path.isfile(path) and not zipfile.is_zipfile(path):
            _exec_as_main(path, namespace)
        else:  # a directory or zip with __main__.py
            namespace.update(runpy.run_path(path, run_name="__main__"))


def _exec_as_main(path: str, namespace: dict[str, Any]) -> None:
    """``runpy.run_path`` would set ``sys.argv[0]`` to the absolute path; Python keeps what
    the user typed, so the script runs in a fresh ``__main__`` module by hand."""
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__builtins__ = builtins
    with io.open_code(path) as source:
        code = compile(source.read(), path, "exec", dont_inherit=True)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    namespace["__loopcheck_main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _module_exists(name: str) -> bool:
    saved = sys.path[0] if sys.path else None
    if sys.path:
        sys.path[0] = os.getcwd()  # where python -m looks first
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
    finally:
        if saved is not None:
            sys.path[0] = saved


def _system_exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what Python does with sys.exit("message")
    return 1


def _print_traceback(exc: BaseException) -> None:
    tb = _user_traceback(exc.__traceback__)
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # Python's hook reads __traceback__


def _die_interrupted() -> None:
    """Python ends an uncaught KeyboardInterrupt by killing itself with SIGINT, so the parent
    sees an interrupted process; do the same after the outputs are written."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except (ValueError, OSError):  # not the main thread: let the exception propagate
        pass


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """Drop the frames of loopcheck and runpy above the script's first frame."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES):
        tb = tb.tb_next
    return tb


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
