"""Check one file: skip it cheaply, parse it once, build the model once, run the rules.

Costs are paid only where needed. A file whose text cannot hold what any selected rule looks for
is never parsed; one whose ``ast`` shows no loop that back-propagates (``loopcheck.screen``) is
parsed by libcst only for the rules that read a few of its statements. The others are modelled on
libcst nodes built from that ``ast`` (``loopcheck.model.from_ast``), whose positions and text come
from the source; libcst's own parse (and its positions, a metadata pass) is for fixes and for what
the built tree cannot tell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.async_keyword import NOTE as ASYNC_NOTE
from loopcheck.async_keyword import read_as_name
from loopcheck.catalog import CODES, NOT_ANALYSED, SYNTAX_ERROR
from loopcheck.config import Options
from loopcheck.excerpt import excerpt
from loopcheck.findings import Finding
from loopcheck.python2 import NOTE as PYTHON2_NOTE
from loopcheck.python2 import read_as_python3
from loopcheck.screen import (Verdict, called_among, hands_optimizer_in_loop, has_training_text, may_train_with, screen,
                              training_call_text)
from loopcheck.selection import resolve
from loopcheck.suppression import is_suppressed

if TYPE_CHECKING:
    import ast

    import libcst as cst

    from loopcheck.fixes import Fix
    from loopcheck.model import FileModel
    from loopcheck.project import Imported
    from loopcheck.rules import Rule, Violation


@dataclass(frozen=True)
class TextTest:
    """What a file's text must hold for one rule to have anything to look at."""

    any_of: tuple[str, ...]
    all_of: tuple[str, ...] = ()
    training_loop: bool = True  # also the text of a training loop (``backward(``, ``loss_scaler(``)
    # texts that stand in for a training loop's (a framework hook the rule reads on its own)
    without_loop: tuple[str, ...] = ()

    def passes(self, source: str, trains: bool | None = None) -> bool:
        """``trains``: whether ``source`` holds a training loop's text (``has_training_text``), if known."""
        if self.training_loop and not (has_training_text(source) if trains is None else trains) \
                and not any(text in source for text in self.without_loop):
            return False
        return any(text in source for text in self.any_of) and all(text in source for text in self.all_of)


@lru_cache(maxsize=None)
def _rules(codes: frozenset[str]) -> tuple[object, ...]:
    from loopcheck.rules import RULES

    return tuple(RULES[code]() for code in sorted(codes) if code in RULES)


def _text_test(rule: object) -> TextTest:
    return TextTest(rule.requires + rule.without_training_loop, rule.requires_all,  # type: ignore[attr-defined]
                    rule.needs_training_loop, rule.without_training_loop)  # type: ignore[attr-defined]


@lru_cache(maxsize=None)
def text_tests(codes: frozenset[str]) -> tuple[TextTest, ...]:
    """One test per rule of ``codes``: a file that passes none of them has nothing to check."""
    return tuple(dict.fromkeys(_text_test(rule) for rule in _rules(codes)))


def wanted(source: str, tests: Iterable[TextTest]) -> bool:
    """Whether any rule can find something in ``source`` (a substring test: microseconds)."""
    trains = has_training_text(source)  # searched once, not once per test: most files have none
    return any(test.passes(source, trains) for test in tests)


def required_texts(codes: frozenset[str]) -> frozenset[str]:
    """Substrings a file must contain (one of them) for any of ``codes`` to find something in it;
    ``wanted(source, text_tests(codes))`` is the exact test."""
    return frozenset(text for test in text_tests(codes) for text in test.any_of)


def check_source(source: str, filename: str = "<string>", select: Iterable[str] | None = None) -> list[Finding]:
    """Findings for ``source`` with the default rules (or ``select``, ruff-style selectors)."""
    codes = resolve(select) if select is not None else resolve()
    return check_text(source, filename, codes)


class LazyProject:
    """The project facts of a file on disk (``loopcheck.project.for_file``), read only where they can
    change the result: for a file with a training loop, or one that imports a module of its own
    project (whose functions may back-propagate when a loop calls them). Reading them costs more
    than the rest of the check of most files."""

    def __init__(self, path: str, cache_dir: Path | None = None) -> None:
        self.path, self.cache_dir = Path(path), cache_dir
        self._digest: str | None = None  # of the facts load() read (taken before the model queries them)
        self._loaded: Imported | None = None

    def load(self, tree: ast.Module | None = None) -> Imported | None:
        """``tree``: the file's own ``ast`` (from the screen), not parsed again."""
        from loopcheck.project import for_file

        loaded = for_file(self.path, self.cache_dir, tree)
        # the digest keys the result cache (where the facts are cached too): without it, no use
        self._digest = loaded.digest() if loaded is not None and self.cache_dir is not None else None
        self._loaded = loaded
        return loaded

    @property
    def digest(self) -> str | None:
        """The digest of the facts the check used (None if none were read): that of ``load``, with
        the project's configurations where the model asked about one (``Imported.with_settings``)."""
        if self._digest is None or self._loaded is None:
            return self._digest
        return self._loaded.with_settings(self._digest)

    def imports_own_module(self, imports: Iterable[tuple[str, int]]) -> bool:
        from loopcheck.project.index import find_root, project_index

        if not self.path.is_file():
            return False
        index = project_index(find_root(self.path), self.cache_dir)
        return any(index.resolve(self.path, module, level) is not None for module, level in imports)


def check_text(source: str, filename: str, codes: frozenset[str], options: Options = Options(),
               project: Imported | LazyProject | None = None) -> list[Finding]:
    return [finding for finding, _ in analyse(source, filename, codes, options, project, whole=False)[1]]


def analyse(source: str, filename: str, codes: frozenset[str], options: Options = Options(),
            project: Imported | LazyProject | None = None,
            whole: bool = True) -> tuple[cst.Module | None, list[tuple[Finding, Fix | None]]]:
    """The parsed module (None when skipped or unparsable) and each finding with its fix, if any.
    ``project``: facts of the project modules the file imports (``loopcheck.project.for_file``), or
    a ``LazyProject`` that reads them only where they can matter. Without ``whole`` (findings only,
    no module to apply fixes to), a file that only rules reading a few statements look at is parsed
    without the other statements."""
    trains = has_training_text(source)
    rules = [r for r in _rules(codes) if _text_test(r).passes(source, trains)]
    if not rules:
        return None, []
    screened = screen(source, filename)
    if screened.verdict is Verdict.SYNTAX_ERROR and screened.error is not None:
        for reading, note in ((read_as_name, ASYNC_NOTE), (read_as_python3, PYTHON2_NOTE)):
            read = reading(source)
            if read is not None and screen(read, filename).verdict is not Verdict.SYNTAX_ERROR:
                return None, _read_as(read, note, source, filename, codes, options, project, whole, screened.error)
    pins_only = False  # loaded only for a rule that reads the pins: no module of its own to read
    if isinstance(project, LazyProject):
        own = screened.verdict is Verdict.TRAINING_LOOP or (
            screened.verdict is Verdict.NO_TRAINING_LOOP and project.imports_own_module(screened.imports())
            and (training_call_text(source) or screened.tree is not None
                 and hands_optimizer_in_loop(screened.tree, source)))
        pins_only = not own and screened.tree is not None and any(r.reads_pins for r in rules)  # type: ignore[attr-defined]
        project = project.load(screened.tree) if own or pins_only else None
    if project is not None and not pins_only and screened.verdict is Verdict.NO_TRAINING_LOOP and \
            screened.tree is not None and \
            may_train_with(screened.tree, source, candidates := project.backward_name_candidates()):
        # the imported modules are read only where a function of theirs can make a training loop, and
        # only for the names the file calls
        screened = screened.rescreen(source, project.backward_names(called_among(source, candidates)))
    if screened.verdict is Verdict.TOO_DEEP:  # libcst would hang or crash where CPython gives up
        return None, [(not_analysed(filename, f"too deeply nested for Python's own parser ({screened.reason})"),
                       None)]
    if screened.verdict is Verdict.SYNTAX_ERROR and screened.error is not None and (
            screened.error.msg or "").startswith("too many"):  # a CPython limit: libcst would hang
        return None, [(_python_syntax_error(filename, source, screened.error), None)]
    if screened.verdict is Verdict.NO_TRAINING_LOOP:
        rules = [r for r in rules if not r.needs_training_loop  # type: ignore[attr-defined]
                 or any(text in source for text in r.without_training_loop)]  # type: ignore[attr-defined]
        if not rules:
            return None, []
    import libcst as cst  # imported here: `loopcheck run` and files skipped above never pay for it

    text, tree = source, screened.tree
    if not whole and tree is not None and all(r.reads_statements_with for r in rules):  # type: ignore[attr-defined]
        text, tree = excerpt(source, tree, [w for r in rules for w in r.reads_statements_with])  # type: ignore[attr-defined]
    elif not whole and tree is not None:
        found = _check_built(tree, source, filename, rules, options, project)
        if found is not None:
            return None, found
    try:
        module = parse_module(text)
    except cst.ParserSyntaxError as error:
        if text is not source:  # an excerpt says nothing the whole file would not: let it decide
            return analyse(source, filename, codes, options, project)
        if screened.error is not None:
            return None, [(_python_syntax_error(filename, source, screened.error), None)]
        # Valid Python that libcst's tokenizer refuses (some mixes of tabs and spaces).
        reason = next((line for line in str(error).splitlines()[1:] if line.strip()), str(error)).strip()
        return None, [(not_analysed(filename, f"libcst cannot parse it although Python can ({reason})"), None)]
    except (RecursionError, MemoryError) as error:  # pathological nesting
        if text is not source:
            return analyse(source, filename, codes, options, project)
        return None, [(not_analysed(filename, f"{type(error).__name__} in libcst's parser"), None)]
    try:
        return module, _check(module, text, filename, rules, options, project, tree, whole_source=source)
    except RecursionError:  # deep nesting that libcst parsed but its own passes cannot walk
        return module, [(not_analysed(filename, "RecursionError while analysing: nested too deeply"), None)]


def _read_as(read: str, note: str, source: str, filename: str, codes: frozenset[str], options: Options,
             project: Imported | LazyProject | None, whole: bool,
             error: SyntaxError) -> list[tuple[Finding, Fix | None]]:
    """The syntax error, told with ``note`` (a pre-3.7 ``async=``: ``loopcheck.async_keyword``; Python 2
    statements: ``loopcheck.python2``), and the findings of the file's reading ``read``. Without fixes:
    they would write the reading's spelling into the file. The flagged lines shown are the file's own."""
    from dataclasses import replace

    lines = source.splitlines()
    # written for an old torch (< 0.4 for `async=`; Python 2 for torch <= 1.4), where a scheduler may be
    # stepped before the optimizer (the order until 1.1): LC302 is silent there, as for a project that
    # pins such a torch
    found = [replace(finding, fix_message=None,
                     source_line=lines[finding.line - 1] if 0 < finding.line <= len(lines) else finding.source_line)
             for finding, _ in analyse(read, filename, codes, options, project, whole)[1] if finding.code != "LC302"]
    syntax = _python_syntax_error(filename, source, error)
    syntax = replace(syntax, message=f"{syntax.message} ({note})")
    return [(finding, None) for finding in sorted([syntax, *found])]


def _check_built(tree: ast.Module, source: str, filename: str, rules: list[object], options: Options,
                 project: Imported | None) -> list[tuple[Finding, Fix | None]] | None:
    """The findings of the model built on the libcst nodes ``loopcheck.model.from_ast`` makes from
    ``tree`` (several times cheaper than libcst's parse), or None where that tree cannot tell: a
    construct it does not build, a field it lacks (fixes that rebuild nodes), a flagged node in
    brackets of its own. libcst's tree decides then."""
    import threading

    from loopcheck.model import from_ast

    if threading.active_count() > 1:  # the built tree's text is kept per process
        return None
    try:
        return _check(from_ast.module(tree, source), source, filename, rules, options, project, tree, built=True)
    except Exception:  # noqa: BLE001  (whatever the built tree cannot answer, libcst's can)
        return None
    finally:
        from_ast.forget()


def parse_module(source: str) -> cst.Module:
    """``libcst.parse_module(source)`` without validating each node the parser builds. A node's
    constructor checks that its fields make valid code (whitespace is whitespace, a name is a
    name), which the native parser's nodes are by construction: about a tenth of the parse. Nodes
    built afterwards (fixes, rules) are validated as usual; with other threads running, which might
    build nodes meanwhile, nothing is skipped."""
    import threading

    import libcst as cst

    if threading.active_count() > 1:
        return cst.parse_module(source)
    validate = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = validate  # type: ignore[method-assign]


def _no_validation(node: object) -> None:
    return None


def _check(module: cst.Module, source: str, filename: str, rules: list[object], options: Options,
           project: Imported | None, tree: ast.Module | None = None,
           built: bool = False, whole_source: str | None = None) -> list[tuple[Finding, Fix | None]]:
    """``source`` may be an excerpt of the file (the statements some rules read); ``whole_source`` is
    then the file's text."""
    from loopcheck.model import build

    model = build(module, source, options, project)
    model.filename = filename
    violations = []
    seen: set[tuple[str, int]] = set()
    for rule in rules:
        for violation in rule.check(model):  # type: ignore[attr-defined]
            key = (rule.code, id(violation.node))  # type: ignore[attr-defined]
            if key not in seen:
                seen.add(key)
                violations.append((rule, violation))
    inside = _inherited_loops(model) if violations else {}
    violations = [(rule, said) for rule, v in violations
                  if (said := _with_setting(model, rule, _inherited(inside, rule, _placed(model, v)))) is not None]
    if violations:
        # the file's own `ast` where ``source`` is the whole file (an excerpt's tree is not)
        whole_tree = tree if whole_source is None or whole_source is source else None
        violations = _run_by_the_script(model, violations, whole_source or source, whole_tree)
    return _findings(module, source, filename, violations, tree, built) if violations else []


def _run_by_the_script(model: FileModel, violations: list[tuple[Rule, Violation]], source: str,
                       tree: ast.Module | None) -> list[tuple[Rule, Violation]]:
    """The violations, less those in a function of a script that its entry point never runs and no
    other module of the project imports, or in a module that runs nothing itself and that no file of
    a project that is no installable package names, or in a function or class of such a module that
    is imported which nothing in it and no other file names (``loopcheck.model.uncalled``): dead code
    as shipped. ``source`` is the whole file, ``tree`` its ``ast`` where the check has it."""
    from loopcheck.model.syntax import walk
    from loopcheck.model.uncalled import definitions_of_a_module, uncalled_functions, unread_definitions

    if model.project is None:
        return violations
    dead: list[cst.FunctionDef | cst.ClassDef] = [*uncalled_functions(model.module, model.source)]
    named = False
    if not dead and not model.project.packaged():
        # a module that runs nothing itself, in a project that is no installable package (whose
        # modules its users import): dead where no file of the project names it
        dead, named = definitions_of_a_module(model.module, source, model.project.path.name, tree), True
    if not dead:
        return violations
    inside = {id(n) for fn in dead for n in walk(fn, into_functions=True)}
    if not any(id(v.node) in inside for _, v in violations):
        return violations
    if model.project.imported_elsewhere(named):
        if not named:
            return violations
        # imported: a function or class of it that nothing in it and no other file of the project names is dead
        unread = {d.name.value: d for d in unread_definitions(model.module, dead)}
        dead = [unread[name] for name in sorted(set(unread) - model.project.named_elsewhere(set(unread)))]
        inside = {id(n) for fn in dead for n in walk(fn, into_functions=True)}
    return [(rule, v) for rule, v in violations if id(v.node) not in inside]


def _placed(model: FileModel, violation: Violation) -> Violation:
    """The violation at the call of the checked file where it points at a test of a base method of
    another module (``Imported.stand_in``), without a fix (that test is not in this file)."""
    from dataclasses import replace

    project = model.project
    call = project.stand_in(violation.node) if project is not None else None
    if call is None:
        return violation
    stmt = next((e.stmt for e in model.events() if e.node is call), violation.stmt)
    if project.stand_in(stmt) is not None:  # type: ignore[union-attr]
        stmt = call
    return replace(violation, node=call, stmt=stmt, fix=None)


def _inherited(inside: dict[int, str], rule: Rule, violation: Violation) -> Violation:
    """The violation, its message naming the library method that back-propagates, where it is about a
    loop whose only backward is one the class inherits (``self.training_step(model, inputs)`` of a
    ``transformers.Trainer`` subclass): the loop's own code shows none. ``inside``: ``_inherited_loops``."""
    from dataclasses import replace

    if id(violation.node) not in inside:
        return violation
    method = inside[id(violation.node)]
    return replace(violation, message=(violation.message or rule.message) +  # type: ignore[attr-defined]
                   f" (the backward is in the inherited `{method}`, which divides the loss by "
                   "`gradient_accumulation_steps` and back-propagates it)")


def _inherited_loops(model: FileModel) -> dict[int, str]:
    """id of every node of an outermost loop whose backward passes are all inherited -> the method."""
    from loopcheck.model import Kind
    from loopcheck.model.syntax import walk

    backwards = model.events(Kind.BACKWARD)
    if not any(e.inherited for e in backwards):
        return {}
    found: dict[int, str] = {}
    tops: dict[int, tuple[object, list[object]]] = {}
    for event in backwards:
        loop = event.loop
        if loop is None:
            continue
        while loop.parent is not None and loop.parent.is_loop:
            loop = loop.parent
        tops.setdefault(id(loop.node), (loop.node, []))[1].append(event)
    for node, events in tops.values():
        if events and all(e.inherited for e in events):  # type: ignore[attr-defined]
            method = events[0].inherited  # type: ignore[attr-defined]
            found.update((id(n), method) for n in walk(node))  # type: ignore[arg-type]
    return found


def _with_setting(model: FileModel, rule: Rule, violation: Violation) -> Violation | None:
    """The violation, its message naming the configuration value it holds under, if any; None where
    that value is inert in everything the project ships (``loopcheck.latent.inert``), or only a builder
    keyword's inert default no caller sets (``loopcheck.latent.unset``)."""
    from dataclasses import replace

    from loopcheck.latent import condition, inert, literal_one, setting, switched_off, unset

    if not violation.needs_accumulation:
        return violation
    if literal_one(model, rule.code, violation.node):
        return None  # `self.config["accum"]` of the file's `config = {"accum": 1, ...}`
    if unset(model, rule.code, violation.node):
        return None  # N is a builder keyword's inert default no caller of the project sets
    if switched_off(model, violation.node):
        return None  # `if cfg['training']['clip_grad_norm']:` and every shipped config says false
    held = setting(model, rule.code, violation.node)
    if held is None:
        return violation
    if inert(model, held):
        return None
    said = condition(model, held)
    if said is None:
        return violation
    return replace(violation, message=(violation.message or rule.message) + said)


def _findings(module: cst.Module, source: str, filename: str, violations: list[tuple[Rule, Violation]],
              tree: ast.Module | None = None, built: bool = False) -> list[tuple[Finding, Fix | None]]:
    """Positioned, unsuppressed findings for the rules' violations, in file order; ``built``: the
    module is ``loopcheck.model.from_ast``'s (positions and texts from the source)."""
    from loopcheck.positions import locate, locate_built

    nodes = [n for _, v in violations for n in (v.node, v.stmt)]
    positions = locate_built(nodes) if built else locate(module, source, nodes, tree)
    code_for_node = _built_text if built else module.code_for_node
    lines = source.splitlines()
    results = []
    for rule, violation in violations:
        where = positions[violation.node]
        stmt_line = positions[violation.stmt].start.line if violation.stmt in positions else where.start.line
        if is_suppressed(rule.code, lines, (where.start.line, stmt_line)):
            continue
        info, fix = CODES[rule.code], violation.fix
        results.append((Finding(
            filename=filename, line=where.start.line, col=where.start.column + 1, code=rule.code, name=info.name,
            message=violation.message or rule.message, severity=info.level.value, end_line=where.end.line,
            end_col=where.end.column + 1,
            source_line=lines[where.start.line - 1] if where.start.line <= len(lines) else "",
            fingerprint=_fingerprint(rule.code, code_for_node(violation.node)),
            fix_message=fix.message if fix else None, fix_safe=fix.safe if fix else True,
        ), fix))
    return sorted(results, key=lambda pair: pair[0])


def _built_text(node: cst.CSTNode) -> str:
    from loopcheck.model.from_ast import text

    found = text(node)
    if found is None:  # a flagged statement: libcst writes it with the comments above it
        raise LookupError(f"no text for a {type(node).__name__}")
    return found


def _fingerprint(code: str, statement: str) -> str:
    import hashlib

    normalised = " ".join(statement.split())
    return hashlib.sha1(f"{code}:{normalised}".encode()).hexdigest()[:16]


def _python_syntax_error(filename: str, source: str, error: SyntaxError) -> Finding:
    """Python's own message and position (``expected ':'`` at 1:16): clearer than the parser
    generator's list of expected tokens."""
    return _syntax_error(filename, source, error.lineno or 1, error.offset or 1, error.msg or "invalid syntax")


def not_analysed(filename: str, reason: str) -> Finding:
    """The notice for a file loopcheck could not analyse (never a problem in the file itself)."""
    return Finding(filename=filename, line=1, col=1, code=NOT_ANALYSED.code, name=NOT_ANALYSED.name,
                   message=f"not analysed: {reason}", severity=NOT_ANALYSED.level.value, end_line=1, end_col=1,
                   fingerprint=_fingerprint(NOT_ANALYSED.code, reason))


def _syntax_error(filename: str, source: str, line: int, col: int, message: str) -> Finding:
    lines = source.splitlines()
    first = re.sub(r"^.*?error at \d+:\d+:\s*", "", message.strip().splitlines()[0] if message.strip() else "")
    if not first or first.startswith("expected one of") and len(first) > 60:
        first = "invalid syntax"
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    return Finding(filename=filename, line=line, col=col, code=SYNTAX_ERROR.code, name=SYNTAX_ERROR.name,
                   message=f"syntax error: {first}", severity=SYNTAX_ERROR.level.value, end_line=line,
                   end_col=col, source_line=source_line, fingerprint=_fingerprint(SYNTAX_ERROR.code, source_line))


def read_source(path: Path) -> str:
    """The file's text as Python reads it (PEP 263 coding cookie, BOM); raises UnicodeDecodeError."""
    return read_source_and_encoding(path)[0]


def read_source_and_encoding(path: Path) -> tuple[str, str]:
    import io
    import tokenize

    data = path.read_bytes()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        # a cookie naming a codec a package registers at run time (`# -*- coding: future_fstrings -*-`)
        # rewrites UTF-8 source: read it as such, and keep the error where it is not UTF-8
        if not str(error).startswith("unknown encoding"):
            raise
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            raise error from None
    return data.decode(encoding), encoding
