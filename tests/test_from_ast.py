"""The libcst nodes built from Python's ``ast`` (``loopcheck.model.from_ast``) are libcst's own in
every field the model reads and in the text of every expression, and ``loopcheck check`` reports
from them exactly what it reports from libcst's parse."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings

from loopcheck import engine
from loopcheck.engine import analyse, check_text
from loopcheck.model import from_ast
from loopcheck.model.syntax import source as code_of
from loopcheck.rules import RULES
from loopcheck.selection import resolve

from .programs import PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
EVERY = frozenset(RULES)

TRICKY = '''\
"""Docstring."""
import os, sys as system
import a.b.c as d
from . import x
from ..m import (y as z, w)
from pkg.sub import *
x = (a + b) * c
t = ((1, 2))
u = a[1, 2], a[(1, 2)], a[::], a[1::], a[:2:], a[:], a[::2], a[1:2:3], a[(1):(2)], a[...]
del a, b
del (c)
v = f((x)) + f(x for x in y) + f((x for x in y)) + g(a, *b, c=1, **d) + g(x=1, *rest)
w = (
    # a comment that the expression follows
    call(
        first,  # after a comment
        second,
    )
)
s = "a" "b" 'c' + f"{x!r:>{width}}" "plain" + rb"\\d" + f"{y=}" + f"{'max', 'min'} {x[0].item():.3f}"
q = ("one"
     # between the pieces
     "two")
if (a and b and (c or d)) and e or (f):
    pass
elif not (x > 1 < y != z is not None in w not in v):
    x += 1; y -= 2
else:
    if z: z = -z
for i, (x, *rest) in enumerate(loader, start=1):
    continue
else:
    break
while (n := n - 1) > 0: n //= 2
async def run(a, /, b=1, *args, c, d=2, **kwargs) -> "T":
    async with lock as held, other:
        await (task)
    async for item in stream:
        yield item
    yield from other
    return [i async for i in aiter() if i if i > 1]
@decorator(arg)
@plain
class Model(Base, metaclass=Meta):
    value: int = 0
    def method(self, x=lambda y=1, *z: (y, z)):
        global counter
        def inner():
            nonlocal x
        try:
            raise ValueError("bad") from None
        except (ValueError, TypeError) as error:
            assert error, "message"
        except Exception:
            pass
        else:
            pass
        finally:
            return {**kwargs, "k": [*a, *b], "s": {1, 2}, "c": {k: v for k, v in items}}
x = 1 if y else (2 if z else 3)
matrix = a @ b; a @= b; a **= 2; a <<= 1; a >>= 1; a |= 1; a &= 1; a ^= 1; a %= 2; a /= 2
value = ~a + -b - +c ** 2 % 3 << 1 >> 2 | 4 & 5 ^ 6
text = """
    # not a comment
""" + call(
    """inside
brackets""", x,
) + backslash \\
    + continued
é = "naïve"; print(é, f(é))
raise ValueError(
    (
        "one " "piece"
    ),
)
y = f((a),), f(b), g, f(x for x in y  # a comment before the call's bracket
)
class A((B),): pass
class C((D)): pass
with (
    a.b(c)
):
    pass
with (a) as b, (c):
    pass
with (a as b, (d)):
    pass
logger.info(
    """stats  # not a comment
       took: {} s.""".format(  # a comment (with brackets)
        time.time() - start
    )
)
prompt = (
    "a "
    f'"""{d}"""\\n'
    "Segment (c) "
    "the end"
)
'''


def _same_as_libcst(source: str) -> list[str]:
    built = from_ast.module(ast.parse(source), source)
    try:
        return list(from_ast.differences(built, cst.parse_module(source)))
    finally:
        from_ast.forget()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_every_construct_is_libcsts_node_with_its_text(newline: str) -> None:
    assert _same_as_libcst(TRICKY.replace("\n", newline)) == []


def test_tabs_and_one_line_suites() -> None:
    assert _same_as_libcst("def f():\n\tif x: y = g(\n\t\t1)\n\tfor a in b: pass\n\ttry: h()\n\texcept E: pass\n") == []


def test_differences_are_reported() -> None:
    built = from_ast.module(ast.parse("x = f(a)\n"), "x = f(a)\n")
    assert list(from_ast.differences(built, cst.parse_module("x = f(b)\n"))) == [
        "module.body[0].body[0].value: text 'f(b)' built 'f(a)'",
        "module.body[0].body[0].value.args[0].value: text 'b' built 'a'",
        "module.body[0].body[0].value.args[0].value.value: 'b' built 'a'"]


@pytest.mark.parametrize("source", [
    "match x:\n    case 1:\n        pass\n",
    "try:\n    pass\nexcept* ValueError:\n    pass\n",
])
def test_constructs_it_does_not_build(source: str) -> None:
    with pytest.raises(from_ast.Unsupported):
        from_ast.module(ast.parse(source), source)


def _fixtures() -> list[Path]:
    return sorted([*ROOT.glob("rules/fixtures/*/*.py"), *ROOT.glob("tests/fixtures/**/*.py"),
                   *ROOT.glob("runtime/*.py")])


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fixtures_are_built_as_libcst_parses_them_and_give_the_same_findings(path: Path) -> None:
    source = path.read_text()
    assert _same_as_libcst(source) == []
    from_libcst = [finding for finding, _ in analyse(source, path.name, EVERY)[1]]  # whole: libcst's tree
    assert check_text(source, path.name, EVERY) == from_libcst


def test_the_check_does_not_parse_with_libcst(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    optimizer.step()\n"
    expected = check_text(source, "train.py", resolve())
    assert [(f.line, f.code) for f in expected] == [(4, "LC103")]

    def refuse(text: str) -> cst.Module:
        raise AssertionError("libcst parsed the file")

    monkeypatch.setattr(engine, "parse_module", refuse)
    assert check_text(source, "train.py", resolve()) == expected


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_rules_read_the_built_tree_of_every_fixture(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that asks a built node for what only libcst's nodes have (a visitor, a statement's
    code) sends the file to libcst's parse, several times the cost, and no finding shows it. The one
    documented reason to go there is a fix that needs the text or position of a node the built
    tree cannot place (a LookupError)."""
    check = engine._check
    failed: list[BaseException] = []

    def recorded(*args: object, **kwargs: object) -> object:
        try:
            return check(*args, **kwargs)  # type: ignore[arg-type]
        except Exception as error:
            if kwargs.get("built"):
                failed.append(error)
            raise

    monkeypatch.setattr(engine, "_check", recorded)
    check_text(path.read_text(), path.name, EVERY)
    assert [e for e in failed if not isinstance(e, LookupError)] == []


def test_a_file_it_does_not_build_is_checked_from_libcsts_tree() -> None:
    source = ("def train(loader, mode):\n    match mode:\n        case 'train':\n            pass\n"
              "    for x in loader:\n        loss = model(x)\n        loss.backward()\n        optimizer.step()\n")
    found = check_text(source, "train.py", resolve())
    assert [(f.line, f.code) for f in found] == [(8, "LC103")]


def test_non_ascii_text_before_a_finding_gives_libcsts_columns() -> None:
    source = ("for x in loader:\n    loss = model(x); é = 'ü'; loss.backward()\n"
              "    note = 'ß'; optimizer.step()\n")
    from_libcst = [finding for finding, _ in analyse(source, "t.py", EVERY)[1]]
    assert check_text(source, "t.py", EVERY) == from_libcst
    assert [(f.line, f.col, f.end_col) for f in from_libcst] == [(3, 17, 33)]


def test_text_of_nodes_the_model_composes_around_built_ones() -> None:
    source = "n = len(xs)\ntotal = epochs * per_epoch\n"
    built = from_ast.module(ast.parse(source), source)
    try:
        xs = built.body[0].body[0].value.args[0].value
        epochs, per_epoch = built.body[1].body[0].value.left, built.body[1].body[0].value.right
        assert code_of(cst.Call(cst.Name("len"), [cst.Arg(xs)])) == "len(xs)"
        assert code_of(cst.BinaryOperation(epochs, cst.Multiply(), per_epoch)) == "epochs * per_epoch"
    finally:
        from_ast.forget()


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(PROGRAMS)
def test_random_programs(source: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
        parsed = cst.parse_module(source)
    except (SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError, MemoryError):
        return
    try:
        built = from_ast.module(tree, source)
    except from_ast.Unsupported:
        return
    try:
        assert list(from_ast.differences(built, parsed)) == []
    finally:
        from_ast.forget()
