"""Functions of a script that its entry point never runs, and modules nothing runs.

A script (a module with an ``if __name__ == "__main__":`` block, or whose module-level code loops or
calls a function of its own, as a notebook exported to a script does) runs what its module-level code
calls, and what those functions call in turn. A top-level function nothing in the file reaches
(``main()`` left beside the ``main_lightning()`` the entry point now runs, and the ``train_epoch`` only
it called) is dead code as the script ships, unless another module imports the script
(``Imported.imported_elsewhere``): a finding in it describes a loop nobody runs.

A module that runs nothing itself (no entry point; module-level code that only imports, defines and
binds names, its definitions undecorated or wrapped by what runs nothing of them at import, such as
``@torch.no_grad()``) does something only where another module imports it: in a repository that is no
installable package, one that no file of the project imports (a helper module left behind when the
scripts moved on) holds dead code too, and so does a function or class of such a module that is
imported, where nothing in the module and no other file of the project names it (``train_eval_lwf``
left beside the ``train_eval`` the entry script imports; an ``SWAEngine`` class beside the ``Engine``
the training scripts import).

Read from the names the file uses: a name read anywhere outside the function's own body (module-level
code, a class body, another live function, a decorator, a string that names it) keeps it live, and so
does any dynamic lookup (``globals()``, ``fire.Fire()``, ``sys.modules``, ``eval``), which keeps them all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst

from loopcheck.model.syntax import children
from loopcheck.patterns import Pattern

# any of these may call a function by its name (`model.eval()` is no `eval(`)
_DYNAMIC = Pattern(r"(?<![\w.])(?:globals|locals|vars|eval|exec)\(|\bFire\(|sys\.modules|__dict__|import_module\(")


def uncalled_functions(module: cst.Module, source: str) -> list[cst.FunctionDef]:
    """The top-level functions of a script its module-level code never reaches (see the module)."""
    defined = {stmt.name.value for stmt in module.body if type(stmt) is cst.FunctionDef}
    if not any(_is_main_block(stmt) or _runs(stmt, defined) for stmt in module.body) or _DYNAMIC.search(source):
        return []
    functions: dict[str, list[cst.FunctionDef]] = {}
    roots: set[str] = set()
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef:
            if stmt.decorators:
                roots.add(stmt.name.value)  # registered by its decorator (`@hydra.main`, `@app.command`)
            functions.setdefault(stmt.name.value, []).append(stmt)
            roots |= _names(stmt.decorators)
        else:
            roots |= _names([stmt])
    live: set[str] = set()
    pending = [name for name in roots if name in functions]
    while pending:
        name = pending.pop()
        if name in live:
            continue
        live.add(name)
        pending += [n for fn in functions[name] for n in _names([fn.params, fn.body]) if n in functions and n not in live]
    return [fn for name, fns in functions.items() if name not in live for fn in fns]


def definitions_of_a_module(module: cst.Module, source: str, filename: str,
                            tree: ast.Module | None = None) -> list[cst.FunctionDef | cst.ClassDef]:
    """The top-level functions and classes of a module that runs nothing of its own: no entry point,
    and module-level code that only imports, defines and binds names (``logger = getLogger(...)``,
    a ``try:`` around an import). Such a module does something only where another imports it: where
    none does (``Imported.imported_elsewhere``), they are dead code as the project ships. Test
    modules (run by pytest), ``__init__``, ``conftest`` and ``setup`` are not such modules. Read from
    the file's ``ast`` (``tree``, else the source parsed): the model's module may hold only what the
    rules look at."""
    stem = filename.rsplit("/", 1)[-1].removesuffix(".py")
    if stem in ("__init__", "__main__", "conftest", "setup") or stem.startswith("test_") or stem.endswith("_test") \
            or _DYNAMIC.search(source):
        return []
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return []
    if not all(_inert(stmt) for stmt in tree.body):
        return []
    return [stmt for stmt in module.body if type(stmt) in (cst.FunctionDef, cst.ClassDef)]  # type: ignore[misc]


def unread_definitions(module: cst.Module,
                       definitions: list[cst.FunctionDef | cst.ClassDef]) -> list[cst.FunctionDef | cst.ClassDef]:
    """The functions and classes of ``definitions`` (those of a module that runs nothing itself) whose
    name nothing else in the module reads: another module may still use them, which the caller asks the
    project."""
    if not definitions:
        return []
    read: dict[int, set[str]] = {id(stmt): _names([stmt]) for stmt in module.body}
    return [d for d in definitions
            if not any(d.name.value in names for key, names in read.items() if key != id(d))]


def _inert(stmt: ast.stmt) -> bool:
    """A module-level statement that runs nothing the module defines: an import, an undecorated
    definition, a binding, a docstring; a ``try:`` or ``if`` made of such statements (``try: import
    apex``)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        # sacred's `@ex.automain` runs the function when the file is run; `@torch.no_grad()` only wraps it
        return all(_wraps_only(d) for d in stmt.decorator_list)
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)  # a docstring
    if isinstance(stmt, ast.Try):
        return all(_inert(s) for s in [*stmt.body, *stmt.orelse, *stmt.finalbody,
                                        *(s for h in stmt.handlers for s in h.body)])
    if isinstance(stmt, ast.If):
        return all(_inert(s) for s in [*stmt.body, *stmt.orelse])
    return False


# Decorators that wrap or describe what they decorate and run nothing of it when the module is imported.
_WRAPPING = frozenset({"no_grad", "inference_mode", "enable_grad", "contextmanager", "asynccontextmanager", "wraps",
                       "lru_cache", "cache", "cached_property", "script", "ignore", "unused", "compile", "dataclass",
                       "total_ordering", "abstractmethod", "overload", "custom_fwd", "custom_bwd", "autocast"})


def _wraps_only(decorator: ast.expr) -> bool:
    """``@torch.no_grad()``, ``@functools.lru_cache(maxsize=2)``, ``@dataclass``: by its last name."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name in _WRAPPING


def _runs(stmt: cst.CSTNode, defined: set[str]) -> bool:
    """A module-level statement that runs the script without an entry-point test, as notebooks
    exported to scripts do: a loop (``for fold in range(5):``) or a call of a function of the module
    (``defined``)."""
    if type(stmt) in (cst.For, cst.While):
        return True
    if type(stmt) is not cst.SimpleStatementLine:
        return False
    return any(type(small) is cst.Expr and type(small.value) is cst.Call and type(small.value.func) is cst.Name
               and small.value.func.value in defined for small in stmt.body)  # type: ignore[attr-defined]


def _is_main_block(stmt: cst.CSTNode) -> bool:
    if type(stmt) is not cst.If or type(stmt.test) is not cst.Comparison:  # type: ignore[attr-defined]
        return False
    test = stmt.test  # type: ignore[attr-defined]
    parts = [test.left, *(c.comparator for c in test.comparisons)]
    return any(type(p) is cst.Name and p.value == "__name__" for p in parts) \
        and any(type(p) is cst.SimpleString and p.evaluated_value == "__main__" for p in parts)


def _names(nodes: Iterable[cst.CSTNode]) -> set[str]:
    """The names read (and strings written) in ``nodes``, at any depth."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = list(nodes)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Name:
            found.add(node.value)  # type: ignore[attr-defined]
        elif kind is cst.SimpleString:
            value = node.evaluated_value  # type: ignore[attr-defined]
            if isinstance(value, str) and value.isidentifier():
                found.add(value)
        stack.extend(children(node))
    return found
