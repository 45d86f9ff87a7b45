"""The schedulers a project's callers hand to a function of another file, as they built them.

``engine.py``'s ``def train_one_epoch(model, loader, optimizer, scheduler, epoch)`` steps
``scheduler`` on every batch; ``main.py`` builds it (``scheduler = CosineAnnealingLR(optimizer,
T_max=args.epochs)``) and passes it in (``train_one_epoch(model, loader, optimizer, scheduler,
epoch)``). Only the caller shows the horizon. ``stepped_parameters`` finds, in the checked file's
text alone, the top-level functions that step a parameter named for a scheduler; ``passed`` reads
the project files whose text names such a function, finds their calls of it (through the imports
that name the checked file) and gives, for each, where the scheduler they pass was built and the
constructor as they wrote it, their function's single-assignment locals written out. A name the
caller binds in several branches (a fresh run's ``optimizer, scheduler = set_optim(opt, model)``, a
resumed run's ``load(...)``) gives each branch's schedulers; a resuming call that cannot be read is
the configuration it restores. Where any caller passes something else (a parameter of its own, an
unread factory's result, a name bound twice where both bindings may run, a ``*args``), or no caller
is found, nothing is given: the horizon is unknown.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern
from loopcheck.project.flow import bound_once, bound_targets
from loopcheck.project.index import real_path
from loopcheck.project.schedules import RESUME, SCHEDULE, SCHEDULE_TEXT, _constructed, _written, as_called, own_factory
from loopcheck.project.walk import last_name, own_nodes, parsed, walk

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

# (where the scheduler was built, "path:line"; its constructor as the caller wrote it)
Passed = tuple[tuple[str, str], ...]

_DEF = Pattern(rb"^(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.M)
_SCHEDULER_PARAM = Pattern(r"sched", re.I)
_SCHEDULER_WORD = Pattern(rb"sched", re.I)
_BRACKET = Pattern(rb"[()\[\]{}]")
# `self.scheduler = scheduler`, `self.scheduler = kwargs["scheduler"]` (a keyword the callers pass)
_KEPT = Pattern(rb"^[ \t]+self\.(\w*[Ss]ched\w*)[ \t]*=[ \t]*(?:(\w+)|kwargs\[[\"'](\w+)[\"']\])[ \t]*(?:#[^\n]*)?$",
                re.M)
_CLASS = Pattern(rb"^class[ \t]+(\w+)", re.M)
_INIT = Pattern(rb"^[ \t]+def[ \t]+__init__[ \t]*\(", re.M)
_TOP = Pattern(rb"^(?:def|class|if|for|while|with|try|async)\b", re.M)  # a top-level statement ends the class
_ARITHMETIC = {"len", "int", "float", "round", "max", "min", "ceil", "floor", "abs", "sum"}
MAX_CALLERS = 8  # project files that name the function: more is a library's API, not an entry script's call
MAX_FILES = 1000  # project files whose texts are read to find the callers (a larger framework: not read)


def stepped_parameters(text: bytes) -> tuple[tuple[str, str, str, int | None], ...]:
    """(callee, scheduler as the loop names it, parameter, position or None for keyword-only) for
    each top-level function of ``text`` with a parameter named for a scheduler (``scheduler``,
    ``lr_sched``) whose text steps it (``scheduler.step()``), and each top-level class whose
    ``__init__`` keeps such a parameter (``self.scheduler = scheduler``, its only assignment) that
    the text steps (``self.scheduler.step()``): a superset of what the rule asks about, read without
    parsing."""
    if b".step()" not in text or b"ched" not in text:
        return ()
    found = []
    for match in _DEF.finditer(text):
        end = _closing(text, match.end())
        if end is None or not _SCHEDULER_WORD.search(text, match.end(), end):
            continue  # no parameter named for a scheduler: not split into parameters
        for position, name in _parameters(text, match.end()):
            if _SCHEDULER_PARAM.search(name) and f"{name}.step()".encode() in text:
                found.append((match.group(1).decode(), name, name, position))
    for match in _KEPT.finditer(text):
        attr, param = match.group(1).decode(), (match.group(2) or match.group(3)).decode()
        if f"self.{attr}.step()".encode() not in text or \
                len(re.findall(rb"self\." + attr.encode() + rb"\s*=[^=]", text)) != 1:
            continue
        cls = None
        for cls in _CLASS.finditer(text, 0, match.start()):
            pass  # the last top-level class before the assignment
        init = _INIT.search(text, cls.end(), match.start()) if cls is not None else None
        if cls is None or init is None or _TOP.search(text, cls.end(), match.start()):
            continue  # not in a class's `__init__`, or the class ended before it
        if match.group(3):
            # a keyword of `**kwargs` (`self.scheduler = kwargs["scheduler"]`): passed by name only
            if re.search(rb"\*\*kwargs\b", text[init.end():text.find(b")", init.end()) + 1]):
                found.append((cls.group(1).decode(), f"self.{attr}", param, None))
            continue
        params = _parameters(text, init.end())
        position = next((p for p, name in params if name == param), -1)
        if params[:1] == [(0, "self")] and position != -1:
            found.append((cls.group(1).decode(), f"self.{attr}", param,
                          position - 1 if position is not None else None))
    return tuple(found)


def _parameters(text: bytes, start: int) -> list[tuple[int | None, str]]:
    """(position or None, name) of the parameters written from ``start`` (after the ``(`` of a
    ``def``) to its closing parenthesis; [] where a ``*args`` makes the positions after it unknown."""
    end = _closing(text, start)
    if end is None:
        return []
    pieces, depth, current = [], 0, bytearray()
    for byte in re.sub(rb"#[^\n]*", b"", text[start:end - 1]):
        char = bytes([byte])
        if char in b"([{":
            depth += 1
        elif char in b")]}":
            depth -= 1
        if char == b"," and depth == 0:
            pieces.append(bytes(current))
            current = bytearray()
        else:
            current += char
    pieces.append(bytes(current))
    found: list[tuple[int | None, str]] = []
    position: int | None = 0
    for piece in pieces:
        words = piece.strip()
        if not words or words == b"/":
            continue
        if words.startswith(b"*"):
            if words.strip(b"* ") and not words.startswith(b"**"):
                return []  # `*args`: a caller's later positions go there
            position = None
            continue
        name = re.match(rb"\w+", words)
        if name is None:
            return []
        found.append((position, name.group(0).decode()))
        if position is not None:
            position += 1
    return found


def _closing(text: bytes, start: int) -> int | None:
    """The index past the bracket that closes the one opened just before ``start`` (None if none)."""
    depth = 1
    for bracket in _BRACKET.finditer(text, start):
        depth += 1 if bracket.group() in b"([{" else -1
        if not depth:
            return bracket.end()
    return None


def passed(index: ProjectIndex, path: Path, function: str, param: str, position: int | None) -> Passed | None:
    """The schedulers the project's calls of ``function`` (a top-level function of ``path``) pass
    as ``param`` (at ``position``), where every call found passes one built by a constructor the
    caller's function assigns once; None otherwise."""
    key = (str(path), function, param, position)
    known = index.passed_schedulers.get(key)
    if key not in index.passed_schedulers:
        known = index.passed_schedulers[key] = _passed(index, path, function, param, position)
    return known


def _passed(index: ProjectIndex, path: Path, function: str, param: str, position: int | None) -> Passed | None:
    files = index.python_files()
    if len(files) > MAX_FILES:
        return None  # reading every file of a large framework for one function costs too much
    word = function.encode()
    candidates = [(file, text) for file in files if word in (text := index.text_of(file))]
    if len(candidates) > MAX_CALLERS:
        # a common word (`train`, a method's name elsewhere): only the file itself and those that name
        # its module can call its function, unless a package's `__init__` hands the name on
        stem = path.stem.encode()
        if not any(stem in index.text_of(file) for file in files if file.name == "__init__.py"):
            candidates = [(file, text) for file, text in candidates if stem in text or real_path(file) == path]
    if len(candidates) > MAX_CALLERS:
        return None
    found: list[tuple[str, str]] = []
    for file, text in candidates:
        tree = parsed(text)
        if tree is None:
            return None  # a caller we cannot read may pass anything
        calls = _calls(index, file, tree, path, function)
        if calls is None:
            return None
        rel = index.relative(file)
        for call, scope in calls:
            built = _built(call, scope, param, position, lambda c, at: _factory(index, file, tree, text, c, at))
            if built is None:
                return None
            if built is not False:
                found.extend((f"{rel}:{line}", constructor) for line, constructor in built)  # type: ignore[union-attr]
    return tuple(sorted(set(found))) or None


def _calls(index: ProjectIndex, file: Path, tree: ast.Module, target: Path, function: str
           ) -> list[tuple[ast.Call, ast.AST]] | None:
    """The calls of ``function`` of ``target`` in ``file``, each with the function (or module)
    whose own statements hold it; None where a star import of ``target`` hides them."""
    names: set[str] = {function} if real_path(file) == target else set()
    modules: set[str] = set()
    nodes = walk(tree)  # walked once, for each reading below
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    if index.resolve(file, node.module or "", node.level) == target:
                        return None
                    continue
                local = alias.asname or alias.name
                if alias.name == function and _defining(index, file, node.module or "", node.level, function) == target:
                    names.add(local)
                elif index.resolve(file, f"{node.module}.{alias.name}" if node.module else alias.name,
                                   node.level) == target:
                    modules.add(local)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if index.resolve(file, alias.name, 0) == target:
                    modules.add(alias.asname or alias.name)
    if not names and not modules:
        return []

    def names_it(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Name) and expr.id in names or isinstance(expr, ast.Attribute) \
            and expr.attr == function and _dotted(expr.value) in modules

    calls = [n for n in nodes if isinstance(n, ast.Call) and names_it(n.func)]
    called = {id(call.func) for call in calls}
    for node in nodes:
        # handed on (`run(train_one_epoch)`, `fn = train_one_epoch`) or subclassed (`class
        # MyTrainer(Trainer)`): calls under another name pass what is not read here
        if names_it(node) and id(node) not in called and not isinstance(getattr(node, "ctx", None), ast.Store):
            return None
    # each call's scope: the innermost function whose lines hold it (or the module)
    functions = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    found: list[tuple[ast.Call, ast.AST]] = []
    for call in calls:
        holding = [f for f in functions if f.lineno <= call.lineno <= (f.end_lineno or f.lineno)
                   and not (f.lineno == call.lineno and f.col_offset > call.col_offset)]
        scope = max(holding, key=lambda f: (f.lineno, f.col_offset), default=tree)
        if isinstance(scope, ast.Lambda):
            return None  # bound inside a lambda: not read
        found.append((call, scope))
    return found


def _built(call: ast.Call, scope: ast.AST, param: str, position: int | None,
           factories: Callable[[ast.Call, int | None], tuple[tuple[str, ...], tuple[str, ...]] | None]
           ) -> list[tuple[int, str]] | bool | None:
    """(line, constructor text) of each scheduler ``call`` may pass as ``param`` (one, or one per
    branch of a project factory that built it); False where it passes ``None`` (no scheduler); None
    where what it passes is not known. ``factories``: the parameters and returned schedulers of a
    project function a call runs, if it returns schedulers."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    value = next((k.value for k in call.keywords if k.arg == param), None)
    if value is None and position is not None and position < len(call.args):
        value = call.args[position]
    if value is None:
        return None  # the default: the callee's, not read
    if isinstance(value, ast.Constant) and value.value is None:
        return False
    if not isinstance(value, ast.Name):
        return None
    nodes = own_nodes(scope)
    bindings = _bindings(nodes, value.id)
    if bindings and len(bindings) > 1:
        bindings = _live(scope, value.id, bindings, call.lineno)
    if not bindings:
        return None
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in nodes):
        return None
    # `opt.train_batch_size = ...` changes the object `opt` holds, not the name: `opt = parse()` is
    # still its one binding, and a constructor that reads a changed attribute is not read (below)
    changed = {f"{t.value.id}.{t.attr}" for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
               if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)}
    assigned = bound_once([n for n in nodes if not _attribute_store(n)])
    # names bound in ways `bound_once` does not read (`with ... as x`, `except E as x`, imports,
    # `:=`): not the module's, and not followed
    other = {n.id for item in nodes if isinstance(item, ast.withitem) and item.optional_vars is not None
             for n in walk(item.optional_vars) if isinstance(n, ast.Name)}
    other |= {n.name for n in nodes if isinstance(n, ast.ExceptHandler) and n.name}
    other |= {(a.asname or a.name).split(".")[0] for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names}
    other |= {n.target.id for n in nodes if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)}
    # names the function neither takes nor binds are the module's (or builtins); its parameters
    # are kept as written (`args.epochs`): the rule reads their names, as it does in one file
    kept = {n.id for n in nodes if isinstance(n, ast.Name) and n.id not in assigned and n.id not in other}
    # a local holding an object (`loader = DataLoader(...)`) stays a name, which the rule reads as
    # the file would (`len(loader)`); one holding a number is written out (`total = epochs * n`)
    objects = {name for name, v in assigned.items() if name != value.id and isinstance(v, ast.Call)
               and last_name(v.func) not in _ARITHMETIC}
    kept |= objects
    assigned = {name: v for name, v in assigned.items() if name not in objects}
    found: list[tuple[int, str]] = []
    resumed = False
    for constructor, at in bindings:
        built = _one_binding(constructor, at, assigned, kept, factories)
        if built is None and len(bindings) > 1 and RESUME.search(last_name(constructor.func)):
            # `model, optimizer, scheduler, ... = load(checkpoint_path, opt)` beside the fresh
            # `optimizer, scheduler = set_optim(opt, model)`: resuming restores the scheduler the same
            # code built and saved, one configuration with the fresh run
            resumed = True
            continue
        if built is None or any(re.search(rf"\b{re.escape(attr)}\b", text) for _, text in built for attr in changed):
            return None
        found.extend(built)
    return found if found or not resumed else None


def _attribute_store(node: ast.AST) -> bool:
    """``opt.x = ...`` (``+=``, annotated), every target an attribute of a plain name."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AugAssign, ast.AnnAssign)) else []
    return bool(targets) and all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) for t in targets)


_MAX_BINDINGS = 4  # a scheduler bound in more places than this: not read


def _bindings(nodes: list[ast.AST], name: str) -> list[tuple[ast.Call, int | None]] | None:
    """(call, position in the tuple it returns or None) for each statement of ``nodes`` that binds
    ``name``: ``scheduler = build(...)``, ``optimizer, scheduler = set_optim(opt, model)``, one per
    branch; None where one binds it otherwise (a loop, ``+=``, a value that is not a call)."""
    found: list[tuple[ast.Call, int | None]] = []
    for sub in nodes:
        for target in bound_targets(sub):
            if not any(isinstance(n, ast.Name) and n.id == name for n in walk(target)):
                continue
            if not isinstance(sub, ast.Assign) or not isinstance(sub.value, ast.Call) or len(sub.targets) != 1:
                return None
            if isinstance(target, ast.Name):
                found.append((sub.value, None))
            elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                found.append((sub.value, [e.id for e in target.elts].index(name)))  # type: ignore[attr-defined]
            else:
                return None
    return found if len(found) <= _MAX_BINDINGS else None


def _live(scope: ast.AST, name: str, bindings: list[tuple[ast.Call, int | None]], line: int
          ) -> list[tuple[ast.Call, int | None]] | None:
    """The bindings that may reach the call at ``line``, each in a branch of its own (``if fresh:
    ... = set_optim(opt, model)`` / ``else: ... = load(path, opt)``): one bound later at the same or an
    outer level replaces an earlier one; None where two may both run (``scheduler = Warmup(...,
    after_scheduler=scheduler)`` wraps the first) or one comes after the call."""
    paths: dict[int, tuple[tuple[int, str], ...]] = {}

    def visit(body: list[ast.stmt], path: tuple[tuple[int, str], ...]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                paths[id(stmt.value)] = path
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner, (*path, (id(stmt), field)))
            for handler in getattr(stmt, "handlers", []):
                visit(handler.body, (*path, (id(stmt), "except")))

    visit(getattr(scope, "body", []), ())
    if any(id(c) not in paths or c.lineno > line or any(isinstance(n, ast.Name) and n.id == name for n in walk(c))
           for c, _ in bindings):
        return None
    live = [(c, at) for c, at in bindings
            if not any(o.lineno > c.lineno and paths[id(c)][:len(paths[id(o)])] == paths[id(o)] for o, _ in bindings)]
    for i, (first, _) in enumerate(live):
        for second, _ in live[i + 1:]:
            a, b = paths[id(first)], paths[id(second)]
            shared = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), None)
            if shared is None or a[shared][0] != b[shared][0]:
                return None  # not two branches of one statement: both may run
    return live


def _one_binding(constructor: ast.Call, at: int | None, assigned: dict[str, ast.expr | None], kept: set[str],
                 factories: Callable[[ast.Call, int | None], tuple[tuple[str, ...], tuple[str, ...]] | None]
                 ) -> list[tuple[int, str]] | None:
    """(line, constructor text) of each scheduler one binding may hold (element ``at`` of the tuple
    the call returns, if given); None where it is not known."""
    scheduler = at is None and SCHEDULE.search(last_name(constructor.func)) is not None
    factory = None if scheduler else factories(constructor, at)
    if factory is None and not scheduler:
        return None  # neither a scheduler's constructor nor a project function that returns one
    if factory is not None:
        # `scheduler = build_scheduler(optimizer, args)`: each scheduler the factory returns, with
        # the caller's arguments (written out as the caller sees them) in place of its parameters
        params, schedules = factory
        if any(isinstance(a, ast.Starred) for a in constructor.args) or \
                any(k.arg is None or k.arg not in params for k in constructor.keywords):
            return None
        given = [*enumerate(constructor.args), *((params.index(k.arg), k.value) for k in constructor.keywords)]
        args = {}
        for position, arg in given:
            written = _written(arg, {}, assigned, 0, kept)  # type: ignore[arg-type]
            # an argument the caller binds in several places (`model`, in each branch) is given as
            # `None`, as `_constructed` gives one: a length that names it has no unit
            args[position] = ast.unparse(written) if written is not None else "None"
        texts = [as_called(marked, args) for marked in schedules]
        if not texts or any(text is None for text in texts):
            return None
        return [(constructor.lineno, text) for text in texts]  # type: ignore[misc]
    written = _constructed(constructor, {}, assigned, kept)
    if written is None:
        return None
    return [(constructor.lineno, ast.unparse(written))]


def _factory(index: ProjectIndex, file: Path, tree: ast.Module, text: bytes, call: ast.Call,
             position: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(parameters, returned schedulers as ``schedules.returned`` marks them; those at ``position`` of
    the tuples it returns, if given) of the project function ``call`` runs: a top-level function of
    ``file`` or one imported from a project module by a plain name, or ``pkg.module.fn(...)`` of a
    module imported whole (``import src.util``); None for any other call or a function that returns
    no scheduler it can read."""
    if isinstance(call.func, ast.Attribute):
        return _dotted_factory(index, file, tree, call.func, position)
    if not isinstance(call.func, ast.Name):
        return None
    name = call.func.id
    own = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if len(own) == 1:
        source = ast.get_source_segment(text.decode("utf-8", "replace"), own[0])
        found = own_factory(source, False, position) if source and SCHEDULE_TEXT.search(source) else ((), ())
        return found if found[1] else None
    imported = [(node.module or "", node.level, alias.name) for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names if (alias.asname or alias.name) == name]
    if len(imported) != 1:
        return None
    module, level, attr = imported[0]
    path = _defining(index, file, module, level, attr)
    return _schedules_of(index, path, attr, position)


def _dotted_factory(index: ProjectIndex, file: Path, tree: ast.Module, func: ast.Attribute, position: int | None
                    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``_factory`` of ``src.util.set_optim(...)``, where the file imports ``src.util`` whole."""
    module = _dotted(func.value)
    if module is None or "." not in module or not any(
            isinstance(node, ast.Import) and any(a.name == module and a.asname is None for a in node.names)
            for node in tree.body):
        return None  # `util.fn(...)` of `from src import util` and the like: not read here
    return _schedules_of(index, index.resolve(file, module, 0), func.attr, position)


def _schedules_of(index: ProjectIndex, path: Path | None, name: str, position: int | None
                  ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    if path is None or not index.may_define(path, name):
        return None
    facts = index.facts(path, names=[name])
    function = facts.functions.get(name) if facts is not None else None
    if function is None:
        return None
    schedules = function.schedules if position is None else dict(function.schedules_at).get(position, ())
    return (function.params, schedules) if schedules else None


def _defining(index: ProjectIndex, file: Path, module: str, level: int, name: str) -> Path | None:
    """The project file that defines ``name`` for ``from module import name`` in ``file``: the module,
    or the one its package's ``__init__`` imports the name from (``from .train_and_eval import
    train_one_epoch``); None if neither defines it."""
    path = index.resolve(file, module, level)
    if path is None or index.may_define(path, name):
        return path
    if path.name != "__init__.py" or name.encode() not in index.text_of(path):
        return None
    tree = parsed(index.text_of(path))
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name and (a.asname or a.name) == name for a in node.names):
            found = index.resolve(path, node.module or "", node.level)
            return found if found is not None and index.may_define(found, name) else None
    return None


def _dotted(expr: ast.expr) -> str | None:
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))
