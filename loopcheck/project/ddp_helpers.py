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
from loopcheck.project.facts import _statements, ast_dotted, import_table
from loopcheck.project.walk import parsed

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
            tree = parsed(text)
            if tree is not None:
                index.ddp_handed.extend(_handed_by(index, file, tree, wrapping))
    return index.ddp_handed


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
        for file, _ in _callers(index):
            # what each function returns is read once per version of the file (the facts cache keeps
            # it): a warm run asks for the relays of every checked file's cache key
            facts = index.facts(file, functions=False, returns=True)
            for function, callees in (facts.returned_calls or {}).items() if facts is not None else ():
                if any((found := _named_callee(index, file, facts.imports, callee)) is not None
                       and (index.relative(found[0]), found[1]) in wrapping for callee in callees):
                    index.ddp_relays.setdefault(file, set()).add(function)
    return index.ddp_relays


def stamps(index: ProjectIndex, path: Path) -> list[str]:
    """What ``handed`` may say of ``path`` besides the helpers' own modules (whose facts say what
    they return): the files whose text calls a helper or a relaying function and names ``path``'s
    module, with their sizes and modification times, then the helpers' callers (where a relaying
    function may change), the helpers and the relaying functions. Cheap: a checked file's cache key
    holds it, while ``handed`` runs only for a loop that asks; only the helpers' callers (at most
    ``MAX_CALLERS`` files, where a project has a DDP-returning helper) are parsed, once per version of
    each (what their functions return is kept with their facts)."""
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
    dotted = ast_dotted(func)
    return _named_callee(index, file, imports, dotted) if dotted is not None else None


def _named_callee(index: ProjectIndex, file: Path, imports: dict[str, tuple[str, str, int]], dotted: str
                  ) -> tuple[Path, str] | None:
    """``_callee`` of a callee's dotted name (``utils.wrap``)."""
    first, *parts = dotted.split(".")
    if first not in imports:
        return None
    module, attr, level = imports[first]
    if not parts:
        if not attr:
            return None
        path = index.resolve(file, module, level)
        name = attr
    else:
        path = index.resolve(file, ".".join([p for p in (module, attr) if p] + parts[:-1]), level)
        name = parts[-1]
    if path is None or not index.may_define(path, name):
        return None
    return path, name
