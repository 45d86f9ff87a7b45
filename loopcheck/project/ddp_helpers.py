"""Files that get DDP modules from a project helper and hand them to another module.

``models/model.py`` wraps the models (``def prepare_parallel_training(Gen, Dis): Dis = DDP(Dis);
return Gen, Dis``); ``loader.py`` calls it (``Gen, Dis = model.prepare_parallel_training(Gen, Dis)``)
and builds the training loop's object with what it got (``WORKER(Gen=Gen, Dis=Dis)``, a class of
``worker.py``). Neither ``loader.py`` nor ``worker.py`` calls ``DDP(...)``, yet ``worker.py``'s loop
runs DDP modules: ``handed`` names ``worker.py`` as such a target, with the helper's call as where
the wrap comes from.

The helper may also be one hop further: ``lizrd/train/train_utils.py``'s ``get_model()`` returns what
``wrap_in_ddp()`` of ``lizrd/core/distributed.py`` returned (``model = wrap_in_ddp(module=model, ...)``
... ``return model``), and the entry script hands ``get_model()``'s result to the trainer class: such a
relaying function counts as a helper too (one hop, no more).

Read only where a project file builds a DDP wrapper in a top-level function that returns it
(``ModuleFacts.returns_ddp``); then only the files whose text calls such a function are parsed (and
the files calling a relaying function of those).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.project.callers import MAX_CALLERS, MAX_FILES
from loopcheck.project.facts import _statements, import_table

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex


def handed(index: ProjectIndex) -> list[tuple[str, Path]]:
    """(``path:line`` of a call of a DDP-returning helper, a project file whose function or class
    the calling file then hands the helper's results to), once per index."""
    if index.ddp_handed is None:
        index.ddp_handed = []
        relays = _relays(index)
        wrapping = {(index.relative(path), name) for helpers in (_helpers(index), relays)
                    for path, names in helpers.items() for name in names}
        files = dict(_callers(index))
        files.update((f, t) for f, t in _relay_callers(index) if f not in files)
        for file, text in files.items():
            tree = _parsed(text)
            if tree is not None:
                index.ddp_handed.extend(_handed_by(index, file, tree, wrapping))
    return index.ddp_handed


def _parsed(text: bytes) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _relay_callers(index: ProjectIndex) -> list[tuple[Path, bytes]]:
    """(file, text) of each project file but the wrapping ones whose text calls a relaying function."""
    if index.ddp_relay_callers is None:
        relays = _relays(index)
        index.ddp_relay_callers = _callers(index, relays) if relays else []
    return index.ddp_relay_callers


def _relays(index: ProjectIndex) -> dict[Path, set[str]]:
    """Project file -> its top-level functions that return what a DDP-returning helper of another
    module returned (``model = wrap_in_ddp(module=model, ...)`` ... ``return model``), once per index."""
    if index.ddp_relays is None:
        index.ddp_relays = {}
        wrapping = {(index.relative(path), name) for path, names in _helpers(index).items() for name in names}
        for file, text in _callers(index):
            tree = _parsed(text)
            if tree is None:
                continue
            imports = import_table(_statements(tree))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and _returns_helper_result(index, file, imports, node, wrapping):
                    index.ddp_relays.setdefault(file, set()).add(node.name)
    return index.ddp_relays


def _returns_helper_result(index: ProjectIndex, file: Path, imports: dict[str, tuple[str, str, int]],
                           function: ast.FunctionDef | ast.AsyncFunctionDef, wrapping: set[tuple[str, str]]) -> bool:
    """``function`` returns a helper's call or a name bound to one, alone or in a tuple."""
    def wraps(value: ast.expr) -> bool:
        callee = _callee(index, file, imports, value.func) if isinstance(value, ast.Call) else None
        return callee is not None and (index.relative(callee[0]), callee[1]) in wrapping

    statements = _statements(function)  # type: ignore[arg-type]
    held = {n.id for st in statements if isinstance(st, ast.Assign) and wraps(st.value)
            for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for st in statements:
        if isinstance(st, ast.Return) and st.value is not None:
            values = st.value.elts if isinstance(st.value, ast.Tuple) else [st.value]
            if any(isinstance(v, ast.Name) and v.id in held or wraps(v) for v in values):
                return True
    return False


def stamps(index: ProjectIndex, path: Path) -> list[str]:
    """What ``handed`` may say of ``path`` besides the helpers' own modules (whose facts say what
    they return): the files whose text calls a helper or a relaying function and names ``path``'s
    module, with their sizes and modification times, then the helpers' callers (where a relaying
    function may change), the helpers and the relaying functions. Cheap: a checked file's cache key
    holds it, while ``handed`` runs only for a loop that asks; only the helpers' callers (at most
    ``MAX_CALLERS`` files, where a project has a DDP-returning helper) are parsed, once per index."""
    module = (path.parent.name if path.name == "__init__.py" else path.stem).encode()
    callers = _callers(index)
    found = [_stamp(index, file) for file, text in [*callers, *_relay_callers(index)] if module in text]
    if any(found):
        found += [_stamp(index, file) for file, _ in callers]  # where a relaying function may change
        found += [f"{index.relative(p)}:{','.join(sorted(names))}" for p, names in _helpers(index).items()]
        found += [f"{index.relative(p)}:{','.join(sorted(names))}" for p, names in _relays(index).items()]
    return list(dict.fromkeys(f for f in found if f))


def _stamp(index: ProjectIndex, file: Path) -> str:
    try:
        st = os.stat(file)
    except OSError:
        return ""
    return f"{index.relative(file)}:{st.st_size}:{st.st_mtime_ns}"


def called_by(index: ProjectIndex, path: Path) -> list[tuple[str, str]]:
    """(helper name, ``path:line`` of a DDP wrap in its module) of each DDP-returning helper of another
    project module that ``path``'s text calls by name (``model_to_ddp(``), whatever it calls it on:
    ``self.adapter.model_to_ddp(self.model)`` on the module an entry script handed in, which no import
    of ``path`` resolves. Text only; the rule reads the calls' shape."""
    helpers = _helpers(index)
    if not helpers:
        return []
    text = index.text_of(path)
    own = index.relative(path)
    found = []
    for helper, names in helpers.items():
        if index.relative(helper) == own:
            continue  # its own wraps are the file's
        facts = index.facts(helper, functions=False)
        lines = facts.ddp_lines if facts is not None else ()
        found.extend((name, f"{index.relative(helper)}:{lines[0]}") for name in sorted(names)
                     if lines and f"{name}(".encode() in text)
    return found


def _helpers(index: ProjectIndex) -> dict[Path, set[str]]:
    """Project file -> its top-level functions that return a DDP wrapper they build."""
    helpers: dict[Path, set[str]] = {}
    for entry in index.ddp_files():
        if entry.returns_ddp:
            helpers.setdefault(index.root / entry.path, set()).update(entry.returns_ddp)
    return helpers


def _callers(index: ProjectIndex, helpers: dict[Path, set[str]] | None = None) -> list[tuple[Path, bytes]]:
    """(file, text) of each project file but the wrapping ones whose text calls a DDP-returning
    helper (or one of ``helpers``: the relaying functions, see ``_relay_callers``); [] where there are
    too many files to read or too many callers (a library's API)."""
    if helpers is None and index.ddp_helper_callers is not None:
        return index.ddp_helper_callers
    found: list[tuple[Path, bytes]] = []
    if helpers is None:
        index.ddp_helper_callers = found
        helpers = _helpers(index)
    files = index.python_files() if any(helpers.values()) else []
    if len(files) > MAX_FILES:
        return found
    words = [f"{name}(".encode() for names in helpers.values() for name in names]
    entries = {entry.path for entry in index.ddp_files()}
    for file in files:
        text = index.text_of(file)
        if any(word in text for word in words) and index.relative(file) not in entries:
            found.append((file, text))  # a file that wraps itself is an entry script already
    if len(found) > MAX_CALLERS:
        found.clear()
    return found


def _handed_by(index: ProjectIndex, file: Path, tree: ast.Module, wrapping: set[tuple[str, str]]
               ) -> list[tuple[str, Path]]:
    """What ``file`` hands the results of a DDP-returning helper to: the project files defining the
    functions or classes that a statement of it calls with a name bound to those results as an
    argument (``worker = WORKER(Gen=Gen, Dis=Dis)``, ``train(Dis, loader)``). Statements only: a
    call nested in an expression is not read (nor walked: the file is read statement by statement)."""
    statements = _statements(tree)
    imports = import_table(statements)
    held: set[str] = set()
    first = 0
    calls: list[ast.Call] = []
    for node in statements:
        value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            continue
        callee = _callee(index, file, imports, value.func) if isinstance(node, ast.Assign) else None
        if callee is not None and (index.relative(callee[0]), callee[1]) in wrapping:
            held.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))  # type: ignore[union-attr]
            first = first or node.lineno
        else:
            calls.append(value)
    if not held:
        return []
    targets: list[tuple[str, Path]] = []
    for call in calls:
        if not any(isinstance(a, ast.Name) and a.id in held for a in [*call.args, *(k.value for k in call.keywords)]):
            continue
        callee = _callee(index, file, imports, call.func)
        if callee is not None and (index.relative(callee[0]), callee[1]) not in wrapping:
            targets.append((f"{index.relative(file)}:{first}", callee[0]))
    return list(dict.fromkeys(targets))


def _callee(index: ProjectIndex, file: Path, imports: dict[str, tuple[str, str, int]], func: ast.expr
            ) -> tuple[Path, str] | None:
    """(project file, name) of what ``func`` names through ``file``'s imports: ``name`` imported
    from a module, or ``module.name`` of a module imported whole; None for anything else."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in imports:
        return None
    parts.reverse()
    module, attr, level = imports[func.id]
    if not parts:
        if not attr:
            return None
        path = index.resolve(file, module, level)
        name = attr
    else:
        dotted = ".".join([p for p in (module, attr) if p] + parts[:-1])
        path = index.resolve(file, dotted, level)
        name = parts[-1]
    if path is None or not index.may_define(path, name):
        return None
    return path, name
