"""Accumulation pitfalls with the window's step condition written in other forms real code uses.

The accumulation operators (``ops_accumulation``) inject into the forms the corpora hold most, above
all ``for i, batch in enumerate(loader): ... if (i + 1) % N == 0: <step>``. Real loops write the same
window in other ways; a reading that holds for one form and not another misses real bugs. Each
operator here takes such a window, rewrites its step condition into another form that steps on the
same micro-batches, and injects one pitfall of ``ops_accumulation`` (or none: then any new finding,
shown as "seen as another code", is a false one):

* ``one_based``: ``enumerate(loader, 1)`` and ``i % N == 0`` (every ``i + 1`` of the loop made ``i``);
  its off-by-one (LC106) is ``enumerate(loader, 1)`` with ``(i + 1) % N == 0`` left as it was;
* ``flag``: ``update_now = <test>`` appended to the statement before the ``if`` (one line, same block),
  and ``if update_now:``;
* ``tqdm``: ``enumerate(tqdm(loader))`` in a file that imports tqdm's ``tqdm``.

Precondition (besides the pitfall operator's own): the loop is ``for i, ... in enumerate(X)`` with
``X`` on one line and no start, the ``if`` tests ``(i + 1) % N`` itself (not a flag), and ``i`` is
not reassigned in the loop.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from benchmarks.mutation import ops_accumulation as acc
from benchmarks.mutation.run import Mutant

Form = Callable[[str, ast.For, ast.If, str], "str | None"]
_FLAG = "update_now"
_TQDM = re.compile(r"^\s*(from\s+tqdm(\.auto)?\s+import\s+(.*\btqdm\b)|import\s+tqdm\s*$)", re.M)


def _index(loop: ast.AST, test: ast.If) -> str | None:
    """``i`` of ``for i, ... in enumerate(X)`` where ``test`` holds ``(i + 1) % N`` and nothing in the
    loop reassigns ``i``."""
    if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
        return None
    call = loop.iter
    if not (isinstance(call.func, ast.Name) and call.func.id == "enumerate" and len(call.args) == 1
            and not call.keywords and call.lineno == call.end_lineno
            and isinstance(loop.target, ast.Tuple) and isinstance(loop.target.elts[0], ast.Name)):
        return None
    index = loop.target.elts[0].id
    if not any(_plus_one(n, index) for n in ast.walk(test.test)):
        return None
    for node in ast.walk(loop):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) and node is not loop else []
        if any(isinstance(n, ast.Name) and n.id == index for t in targets for n in ast.walk(t)):
            return None
    return index


def _plus_one(node: ast.AST, index: str) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name) \
        and node.left.id == index and acc._int(node.right) == 1 and node.lineno == node.end_lineno


def _edits(source: str, edits: list[tuple[ast.AST, str]]) -> str:
    """Each node replaced by its text, last first, so the positions of the others hold."""
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):  # type: ignore[attr-defined]
        source = acc._replace_node(source, node, text)
    return source


def one_based(source: str, loop: ast.For, test: ast.If, index: str) -> str | None:
    plus = [n for s in loop.body for n in ast.walk(s) if _plus_one(n, index)]
    left = {id(n.left) for n in plus}  # type: ignore[attr-defined]
    if any(isinstance(n, ast.Name) and n.id == index and id(n) not in left for s in loop.body for n in ast.walk(s)):
        return None  # `i` read otherwise (`batches[i]`, `i % log_every`): starting at 1 would change it
    call = loop.iter
    assert isinstance(call, ast.Call)
    return _edits(source, [(n, index) for n in plus] + [(call, f"enumerate({acc._text(call.args[0])}, 1)")])


def one_based_off_by_one(source: str, loop: ast.For, test: ast.If, index: str) -> str | None:
    call = loop.iter
    assert isinstance(call, ast.Call)
    return _edits(source, [(call, f"enumerate({acc._text(call.args[0])}, 1)")])


def flag(source: str, loop: ast.For, test: ast.If, index: str) -> str | None:
    if _FLAG in source:
        return None
    body = next((b for b in _bodies(loop) if test in b), None)
    position = body.index(test) if body is not None else 0
    if body is None or position == 0:
        return None
    before = body[position - 1]
    if not isinstance(before, (ast.Expr, ast.Assign, ast.AugAssign)) or not acc._ends_line(source, before) \
            or test.test.lineno != test.lineno:
        return None
    mutated = _edits(source, [(test.test, _FLAG)])
    return acc._after(mutated, before, f"{_FLAG} = {acc._text(test.test)}")


def tqdm(source: str, loop: ast.For, test: ast.If, index: str) -> str | None:
    imported = _TQDM.search(source)
    if imported is None:
        return None
    call = loop.iter
    assert isinstance(call, ast.Call)
    wrapped = acc._text(call.args[0])
    if "tqdm" in wrapped:
        return None
    wrap = "tqdm" if imported.group(3) else "tqdm.tqdm"
    return _edits(source, [(call.args[0], f"{wrap}({wrapped})")])


def _bodies(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for sub in ast.walk(node):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(sub, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _window(tree: ast.Module, loop_line: int, test_line: int) -> tuple[ast.For, ast.If, str] | None:
    loop = next((n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == loop_line), None)
    test = next((n for n in ast.walk(loop) if isinstance(n, ast.If) and n.lineno == test_line), None) \
        if loop is not None else None
    index = _index(loop, test) if test is not None else None
    return (loop, test, index) if index is not None else None  # type: ignore[return-value]


def _eligible(source: str, tree: ast.Module) -> list[tuple[int, int]]:
    """(loop line, ``if`` line) of each periodic window in the form this module rewrites."""
    found = []
    for w in acc.windows(source, tree):
        if w.kind == "periodic" and w.test is not None and w.condition is w.test.test and \
                _index(w.loop, w.test) is not None:
            found.append((w.loop.lineno, w.test.lineno))
    return found


def _composed(form: Form, pitfall: Callable[[str, ast.Module], Iterator[Mutant]] | None, name: str) -> Callable:
    def operator(source: str, tree: ast.Module) -> Iterator[Mutant]:
        for loop_line, test_line in _eligible(source, tree):
            if pitfall is None:
                made = form(source, *_window(tree, loop_line, test_line))  # type: ignore[misc]
                if made is not None:
                    yield Mutant("none", test_line, f"{form.__name__} form, no pitfall", made)
                continue
            for mutant in pitfall(source, tree):
                mutated = ast.parse(mutant.source)
                window = _window(mutated, loop_line, test_line)
                if window is None or not window[0].lineno <= mutant.line <= (window[0].end_lineno or 0):
                    continue
                made = form(mutant.source, *window)
                if made is not None:
                    yield Mutant(mutant.code, mutant.line, f"{form.__name__} form: {mutant.what}", made)
    operator.__name__ = name
    operator.__doc__ = f"{pitfall.__name__ if pitfall else 'no pitfall'} in the {form.__name__} form of the window."
    return operator


def _off_by_one(source: str, tree: ast.Module) -> Iterator[Mutant]:
    for loop_line, test_line in _eligible(source, tree):
        window = _window(tree, loop_line, test_line)
        made = one_based_off_by_one(source, *window) if window is not None else None  # type: ignore[misc]
        if made is not None:
            yield Mutant("LC106", test_line, "enumerate(X) made enumerate(X, 1), (i + 1) % N kept", made)


_off_by_one.__name__ = "one_based_boundary_off_by_one"

_PITFALLS = [acc.zero_grad_every_micro_batch, acc.loss_not_divided, acc.clip_every_micro_batch, None]
OPERATORS = [_composed(form, pitfall, f"{form.__name__}_{pitfall.__name__ if pitfall else 'correct'}")
             for form in (one_based, flag, tqdm) for pitfall in _PITFALLS] + [_off_by_one]
