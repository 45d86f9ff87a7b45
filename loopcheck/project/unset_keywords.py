"""A setting that only a builder's keyword default gives, and that no caller of the project sets.

ACNet's trainer steps under ``if_accum_grad = iteration % cfg.grad_accum_iters != 0``; the
config is the namedtuple that ``get_baseconfig_by_epoch(..., grad_accum_iters=1)`` builds in
another module, and none of the entry scripts that call it passes ``grad_accum_iters``: N is 1 in
every run the project can make, nothing accumulates. ``inert_default(index, "grad_accum_iters")``
reads that from the project's Python files (those whose text names the setting, then those whose
text names the functions and namedtuples that declare it) and gives the default (1), or None where
anything could set it otherwise:

- every function that takes it as a parameter gives it an inert default (0, 1, None, False), and
  every other mention of the word is a read (``cfg.grad_accum_iters``, the parameter's own name), a
  keyword argument with an inert literal or forwarding the parameter of that name
  (``BaseConfigByEpoch(..., grad_accum_iters=grad_accum_iters)``, also as a dict entry ``{"grad_accum_iters":
  grad_accum_iters}``), or a field name of a ``namedtuple(...)`` declaration;
- every call of those functions and namedtuples passes too few positional arguments to reach it,
  and no ``*args`` or ``**kwargs`` (a dict of options, a YAML file unpacked into the builder); the
  declaring names are otherwise only called, imported, tested with ``isinstance`` or written as
  annotations (not handed around to be called elsewhere);
- no text names it with dashes (``--grad-accum-iters``, an argparse option) or inside a longer
  string (a command line, a ``getattr`` by name, a docstring), no assignment binds it
  (``cfg.grad_accum_iters = 4``, a yacs default ``_C.X = 1``: configuration-file readings are another
  module's), and at least one function declares it.

Only Python files are read: a setting a configuration file or a command line gives reaches the
builder through one of the forms above (``**cfg``, an option read from ``args``), which keep the
question open. The answer depends on every Python file of the project; ``stamp`` is what a cached
result that used it depends on (``ProjectIndex.python_stamp``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.project.walk import parsed

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

_INERT = (0, 1, None, False)
MAX_FILES = 1000  # a larger tree is a framework whose callers live elsewhere: not read


def inert_default(index: ProjectIndex, name: str, first: Path | None = None) -> int | None:
    """The inert default (0 or 1; None counts as 1's absence and is given as 1) of the setting
    ``name`` where the project gives it only through builder keyword defaults no caller overrides;
    None where anything else may set it (or the project is too large to read). ``first``: the file
    to read first (the checked one: an option it declares settles the question at once)."""
    if not name.isidentifier():
        return None
    cache = index.unset_keywords
    if name not in cache:
        cache[name] = _read(index, name, first)
    return cache[name]


def _read(index: ProjectIndex, name: str, first: Path | None) -> int | None:
    files = index.python_files()
    if len(files) > MAX_FILES:
        return None
    word = name.encode()
    dashed = name.replace("_", "-").encode() if "_" in name else None
    defaults: set[object] = set()
    declared: dict[str, int] = {}  # function or namedtuple -> the lowest position that reaches the setting
    for path in ([first] if first is not None else []) + [f for f in files if f != first]:
        text = index.text_of(path)
        if dashed is not None and dashed in text:
            return None  # `--grad-accum-iters`: an option argparse stores under the name
        if word in text and not _mentions(parsed(text), name, defaults, declared):
            return None
    if not defaults or not declared or any(d not in _INERT for d in defaults):
        return None
    for callee, position in declared.items():
        if not _calls_fall_short(index, files, callee, position):
            return None
    found = {1 if d is None else int(d) for d in defaults}  # type: ignore[call-overload]
    return found.pop() if len(found) == 1 else 1


def _mentions(tree: ast.Module | None, name: str, defaults: set[object], declared: dict[str, int]) -> bool:
    """Whether every mention of ``name`` in ``tree`` is one of the forms the module's doc lists,
    adding the defaults given to it and the names that declare it (with the position of the
    parameter or field) on the way."""
    if tree is None:
        return False
    word = re.compile(rf"\b{re.escape(name)}\b")
    # ids of string constants that are namedtuple field names, or the key of a dict entry that forwards
    # the parameter of that name as a keyword would (`wandb.init(config={"accum": accum})`); `ast.walk`
    # yields a node before its children, so each is noted before its constant comes
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            allowed.update(id(key) for key, value in zip(node.keys, node.values)
                           if isinstance(key, ast.Constant) and key.value == name
                           and isinstance(value, ast.Name) and value.id == name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not _parameter(node, name, defaults, declared):
                return False
        elif isinstance(node, ast.Call) and _called_name(node) == "namedtuple":
            fields = node.args[1] if len(node.args) > 1 else None
            if isinstance(fields, (ast.List, ast.Tuple)):
                for position, element in enumerate(fields.elts):
                    if isinstance(element, ast.Constant) and element.value == name:
                        if any(k.arg in ("defaults", None) for k in node.keywords):
                            return False  # a default of the namedtuple's own
                        owner = _assigned_name(tree, node)
                        if owner is None:
                            return False
                        declared[owner] = min(position, declared.get(owner, position))
                        allowed.add(id(element))
        if isinstance(node, ast.keyword) and node.arg == name:
            value = node.value
            forwarded = isinstance(value, ast.Name) and value.id == name
            if not forwarded and not (isinstance(value, ast.Constant) and value.value in _INERT
                                      and not isinstance(value.value, float)):
                return False
        elif isinstance(node, ast.Attribute) and node.attr == name and not isinstance(node.ctx, ast.Load):
            return False  # `cfg.grad_accum_iters = 4`
        elif isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return False  # the parameter rebound, or a module-level setting
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in allowed \
                and word.search(node.value):
            return False  # `getattr(cfg, "grad_accum_iters")`, a command line, a docstring naming it
        elif isinstance(node, ast.ImportFrom) and any(a.name == name or a.asname == name for a in node.names):
            return False  # a module-level constant of that name, imported
    return True


def _parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str, defaults: set[object],
               declared: dict[str, int]) -> bool:
    """Read ``fn``'s parameter ``name``, if it has one: False where it has no literal default."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    if any(a.arg == name for a in positional):
        at = next(i for i, a in enumerate(positional) if a.arg == name)
        first_default = len(positional) - len(args.defaults)
        if at < first_default:
            return False  # required: every caller gives it
        default = args.defaults[at - first_default]
    elif any(a.arg == name for a in args.kwonlyargs):
        at = -1
        default = args.kw_defaults[next(i for i, a in enumerate(args.kwonlyargs) if a.arg == name)]
        if default is None:
            return False
    else:
        return True
    if isinstance(fn, ast.Lambda) or not isinstance(default, ast.Constant) or isinstance(default.value, float):
        return False
    defaults.add(default.value)
    callee = fn.name
    method = bool(positional) and positional[0].arg in ("self", "cls")
    if method and callee == "__init__":
        return False  # a class's constructor: its callers are the class's, not read here
    position = at - (1 if method else 0) if at >= 0 else 10**6
    declared[callee] = min(position, declared.get(callee, position))
    return True


def _assigned_name(tree: ast.Module, call: ast.Call) -> str | None:
    """``T`` of ``T = namedtuple(...)`` (or ``class T(namedtuple(...))``) holding ``call``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        if isinstance(node, ast.ClassDef) and any(b is call for b in node.bases):
            return node.name
    return None


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _calls_fall_short(index: ProjectIndex, files: list[Path], callee: str, position: int) -> bool:
    """Every call of ``callee`` in the project passes fewer than ``position + 1`` positional
    arguments and unpacks nothing, and the name is used otherwise only where it cannot be called
    out of sight (imported, defined, an annotation, an ``isinstance`` test)."""
    word = callee.encode()
    for path in files:
        text = index.text_of(path)
        if word not in text:
            continue
        tree = parsed(text)
        if tree is None:
            return False
        called: set[int] = set()
        harmless: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node) == callee:
                called.add(id(node.func))
                if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                    return False
                if len(node.args) > position:
                    return False
            elif isinstance(node, ast.Call) and _called_name(node) == "isinstance":
                harmless.update(id(n) for a in node.args[1:] for n in ast.walk(a))
            elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
                harmless.update(id(n) for n in ast.walk(node.annotation))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
                harmless.update(id(n) for n in ast.walk(node.returns))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == callee and id(node) not in called | harmless:
                if isinstance(node.ctx, ast.Load):
                    return False  # handed around (`partial(build, ...)`, a registry): called out of sight
            elif isinstance(node, ast.Attribute) and node.attr == callee and id(node) not in called | harmless:
                return False
    return True
