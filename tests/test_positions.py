"""Positions computed per top-level statement agree with libcst's whole-module PositionProvider."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from loopcheck import positions
from loopcheck.excerpt import excerpt
from loopcheck.model.syntax import walk
from loopcheck.positions import locate

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "rules" / "fixtures").glob("*/*.py"))[:20]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_positions_match_the_whole_module_provider(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    module = cst.parse_module(source)
    nodes = [n for n in walk(module, into_functions=True) if isinstance(n, (cst.Call, cst.SimpleStatementLine))]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = locate(module, source, nodes)
    assert {id(n): found[n] for n in nodes} == {id(n): expected[n] for n in nodes}


def test_decorated_functions_and_comments_above_statements() -> None:
    source = "# header\n\nimport torch\n\n# a comment\n@decorator\n\n@other(1)\ndef f():\n    a = g(1); b = h(2)\n"
    module = cst.parse_module(source)
    calls = [n for n in walk(module, into_functions=True) if isinstance(n, cst.Call)]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = locate(module, source, calls)
    assert [found[c] for c in calls] == [expected[c] for c in calls]


@pytest.mark.parametrize("source", [
    "def f():\n\tx = g(1)\n\ty = g(1)\n\tz = g(2)  # g(2)\n",  # tabs; a text twice; a text also in a comment
    "import torch\r\n\r\nfor b in loader:\r\n    loss(b).backward()\r\n    opt.step()\r\n",  # CRLF line ends
    "x = 1\rfor b in loader:\r    opt.step()\r",  # old Mac line ends: no text search
    "s = 'opt.step()'\nfor b in loader:\n    opt.step()\n    f(a,\n      b)\n",  # the text in a string; a multi-line call
    "if a:\n    pass\nelse:\n    é = ß(1); ß(1)\n",  # non-ASCII names, two statements on a line
])
def test_text_search_agrees_with_the_provider(source: str) -> None:
    module = cst.parse_module(source)
    nodes = [n for n in walk(module, into_functions=True) if isinstance(n, (cst.Call, cst.SimpleStatementLine))]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = locate(module, source, nodes)
    assert {id(n): found[n] for n in nodes} == {id(n): expected[n] for n in nodes}


NESTED = [
    # the same texts in several blocks: found by regenerating the innermost statement of a block
    "def main():\n    for b in loader:\n        if a:\n            opt.step()\n        elif c:\n            opt.step()\n"
    "        else:\n            if d:\n                opt.step()\n    while x:\n        opt.step()\n    else:\n"
    "        opt.step()\n",
    # tabs and odd indentation; comments and blank lines above statements and at a block's end
    "class T:\n\tdef f(self):\n\t\t# c\n\n\t\tfor b in l:\n\t\t\t  opt.step()\n\t\t\t  opt.step()\n\t\t# end\n\n"
    "\tdef g(self):\n\t\topt.step(); opt.step()\n",
    # try/except/else/finally, with, async, decorators (a comment between them), a one-line suite, del
    "async def main():\n    try:\n        opt.step()\n    except E as e:\n        opt.step()\n    else:\n"
    "        del x\n        opt.step()\n    finally:\n        opt.step()\n    async with a as b:\n"
    "        async for c in d:\n            if e: opt.step(); opt.step()\n    # c\n    @dec\n    # c2\n"
    "    @dec(\n        2)\n    def inner():\n        opt.step()\n        opt.step()\n    return inner\n",
    # a call over several lines inside a block, continuation lines indented or not; non-ASCII names
    "def main():\n    for b in loader:\n        loss = f(a,\n                 b)\n        loss = f(a,\nb)\n"
    "        é = ß(1)\n        é = ß(1)\n",
    # match statements
    "def main(x):\n    match x:\n        case 1:\n            opt.step()\n        case _:\n            opt.step()\n",
]


@pytest.mark.parametrize("source", [*NESTED, *(s.replace("\n", "\r\n") for s in NESTED)])
def test_statements_of_blocks_regenerated_alone_agree_with_the_provider(
        source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = cst.parse_module(source)
    nodes = [n for n in walk(module, into_functions=True) if n not in module.body
             and isinstance(n, (cst.Call, cst.BaseStatement, cst.BaseSmallStatement))]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    def whole(module: cst.Module) -> None:
        raise AssertionError("a whole top-level statement regenerated")

    monkeypatch.setattr(positions, "_provided", whole)
    found = locate(module, source, nodes)
    assert {id(n): found[n] for n in nodes} == {id(n): expected[n] for n in nodes}


def test_statements_of_an_excerpt_regenerated_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # the excerpt blanks statements that its ast still holds inside the kept class
    source = ("import torch\n\nclass Trainer:\n    def setup(self):\n        self.x = f(1)\n        self.x = f(1)\n"
              "    def step(self):\n        with torch.cuda.amp.autocast():\n            y = f(1)\n"
              "        with torch.cuda.amp.autocast():\n            y = f(1)\n    def other(self):\n        pass\n")
    text, tree = excerpt(source, ast.parse(source), ["amp"])
    assert text != source
    module = cst.parse_module(text)
    nodes = [n for n in walk(module, into_functions=True) if n not in module.body
             and isinstance(n, (cst.Call, cst.BaseStatement, cst.BaseSmallStatement))]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    def whole(module: cst.Module) -> None:
        raise AssertionError("a whole top-level statement regenerated")

    monkeypatch.setattr(positions, "_provided", whole)
    found = locate(module, text, nodes, tree)
    assert {id(n): found[n] for n in nodes} == {id(n): expected[n] for n in nodes}
