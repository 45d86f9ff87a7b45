"""Positions computed per top-level statement agree with libcst's whole-module PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

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
