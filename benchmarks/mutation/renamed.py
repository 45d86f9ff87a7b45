"""Do findings depend on what real code happens to name its variables?

    python -m benchmarks.mutation.renamed --corpus /work/corpus/broad --json /tmp/renamed.json

For every file of the corpora with findings, each function that holds a finding gets its local
variables renamed to names that say nothing (``v0``, ``v1``, ...: every name it binds but its
parameters, which callers may pass by keyword, consistently in nested scopes), and the file is checked again. A
finding lost (or one gained) on a renamed file is a reading that rests on a name where the code
itself says what the object is: real code names its optimizers ``opt_g``, ``optim``, ``o`` just as
often as ``optimizer``. Attributes (``self.optimizer``), keywords and the names of other modules
are left alone, so the program means what it meant.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from multiprocessing import get_context
from pathlib import Path

from benchmarks.mutation.run import findings, training_files

KEEP = {"self", "cls"}


def bound_names(scope: ast.FunctionDef | ast.AsyncFunctionDef | ast.Module) -> list[str]:
    """Names ``scope`` binds itself (assignments, loop and ``with`` targets...; a module: those
    bound outside its functions), in order of first binding; not parameters, ``global``/``nonlocal``
    ones or dunders."""
    shared = {n for node in ast.walk(scope) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    names: dict[str, None] = {}
    for node in _outside_functions(scope) if isinstance(scope, ast.Module) else ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not node.id.startswith("__"):
            names.setdefault(node.id)
    parameters = {a.arg for node in ast.walk(scope) if isinstance(node, ast.arguments)
                  for a in [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg] if a is not None}
    if isinstance(scope, ast.Module):  # a module-level name a function reads stays: its uses there are not renamed
        outside = {id(n) for n in _outside_functions(scope)}
        shared |= {n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and id(n) not in outside}
    return [n for n in names if n not in KEEP and n not in shared and n not in parameters]


def _outside_functions(module: ast.Module) -> list[ast.AST]:
    """The module's nodes outside its functions, classes and lambdas, in source order."""
    def outside(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return []
        return [node, *(n for child in ast.iter_child_nodes(node) for n in outside(child))]

    return [n for stmt in module.body for n in outside(stmt)]


def renamed(source: str, function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Module,
            names: dict[str, str] | None = None) -> str | None:
    """``source`` with ``function``'s own names renamed (by ``names`` where given); None where a use
    cannot be placed or nothing is renamed."""
    if names is None:
        names = {name: f"v{i}" for i, name in enumerate(bound_names(function))}
    if not names:
        return None
    in_fstrings = {id(n) for node in ast.walk(function) if isinstance(node, ast.JoinedStr) for n in ast.walk(node)}
    edits: list[tuple[int, int, int, str]] = []  # (line, start byte, end byte, new)
    for node in _outside_functions(function) if isinstance(function, ast.Module) else ast.walk(function):
        if isinstance(node, ast.Name) and node.id in names:
            if id(node) in in_fstrings:
                return None  # positions inside f-strings are not reliable before Python 3.12
            edits.append((node.lineno, node.col_offset, node.end_col_offset or 0, names[node.id]))
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    for line, start, end, new in sorted(edits, reverse=True):
        lines[line - 1] = lines[line - 1][:start] + new.encode() + lines[line - 1][end:]
    return b"".join(lines).decode()


def scope_of(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Module:
    """The outermost function holding ``line``, else the module."""
    for node in ast.walk(tree):  # breadth first: outer functions come before the ones they hold
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            return node
    return tree


def renamed_pair(source: str, tree: ast.Module, mutated: str, line: int) -> tuple[str, str] | None:
    """``source`` and its mutant ``mutated`` (same line count), each with the local names of the
    scope holding ``line`` renamed the same way (names only the mutant binds follow); None where
    either cannot be renamed."""
    try:
        mutated_tree = ast.parse(mutated)
    except (SyntaxError, ValueError, RecursionError):
        return None
    scope, mutated_scope = scope_of(tree, line), scope_of(mutated_tree, line)
    original = bound_names(scope)
    seen = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)}
    names = [*original, *(n for n in bound_names(mutated_scope) if n not in seen)]
    mapping = {name: f"v{i}" for i, name in enumerate(names)}
    pair = renamed(source, scope, mapping), renamed(mutated, mutated_scope, mapping)
    if pair[0] is None or pair[1] is None:
        return None
    try:
        compile(pair[0], "<renamed>", "exec"), compile(pair[1], "<renamed>", "exec")
    except SyntaxError:
        return None
    return pair[0], pair[1]


def _findings(source: str, path: Path, codes: frozenset[str]) -> Counter[tuple[str, int]]:
    """The rule findings (not LC0xx: a file not analysed, a bad suppression) of ``source``."""
    return Counter({key: n for key, n in findings(source, path, codes).items() if not key[0].startswith("LC0")})


def check(job: tuple[str, Path]) -> list[dict]:
    from loopcheck.selection import resolve

    repo, path = job
    codes = resolve()
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return []
    before = _findings(source, path, codes)
    if not before:
        return []
    out = []
    # each outermost function holding a finding is renamed with all its lines; the module level with
    # the lines of its own findings
    scopes: dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef | ast.Module, set[int]]] = {}
    for _, line in before:
        scope = scope_of(tree, line)
        span = {line} if scope is tree else set(range(scope.lineno, (scope.end_lineno or scope.lineno) + 1))
        scopes.setdefault(id(scope), (scope, set()))[1].update(span)
    for function, span in scopes.values():
        text = renamed(source, function)
        if text is None:
            continue
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue
        after = _findings(text, path, codes)
        inside = lambda found: Counter({k: v for k, v in found.items() if k[1] in span})  # noqa: E731
        lost, gained = inside(before) - inside(after), inside(after) - inside(before)
        out.append({"repo": repo, "file": str(path), "function": getattr(function, "name", "<module>"),
                    "lines": [min(span), max(span)],
                    "before": sorted(inside(before)), "lost": sorted(lost), "gained": sorted(gained)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    files = training_files([c.resolve() for c in args.corpus])
    with get_context("fork").Pool(args.jobs) as pool:
        results = [r for rs in pool.imap_unordered(check, files, chunksize=4) for r in rs]
    results.sort(key=lambda r: (r["file"], r["lines"]))
    kept = sum(len(r["before"]) - len(r["lost"]) for r in results)
    total = sum(len(r["before"]) for r in results)
    print(f"functions renamed: {len(results)}; findings kept {kept} of {total}; "
          f"gained {sum(len(r['gained']) for r in results)}")
    for r in results:
        if r["lost"] or r["gained"]:
            print(f"- {r['file']}:{r['lines'][0]} {r['function']}: lost {r['lost']} gained {r['gained']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
