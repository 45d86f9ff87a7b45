"""The engine's libcst parse: the same tree as libcst's own, without validating parser-built nodes."""

from __future__ import annotations

import threading

import libcst as cst
import pytest

from loopcheck.engine import parse_module

SOURCE = '''\
# a comment
import torch  # trailing

@decorator(x=1)
async def f(a, /, b: int = 2, *args, c, **kw) -> "T":
    """Docstring."""
    async with ctx() as (x, y):
        for i, (p, q) in enumerate(zip(a, b)):
            if i % 4 == 0 and not q:
                loss = (p ** 2 + q[1:3, ...]) / 4  ;  x @= y
            elif lambda z: z:
                yield f"{i!r:>{w}}"
            else:
                raise ValueError from None
    match a:
        case [1, *rest] | {"k": _}:
            pass
    return [j async for j in g() if j] or {k: v for k, v in d.items()}
'''


def _validations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    seen: list[object] = []
    original = cst.CSTNode.__post_init__
    monkeypatch.setattr(cst.CSTNode, "__post_init__", lambda node: (seen.append(node), original(node))[1])
    return seen


def test_the_tree_is_libcsts_own() -> None:
    module = parse_module(SOURCE)
    assert module.code == SOURCE
    assert module.deep_equals(cst.parse_module(SOURCE))


def test_nodes_built_after_a_parse_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _validations(monkeypatch)
    parse_module(SOURCE)
    assert seen == []  # the parser's nodes
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    with pytest.raises(cst.CSTValidationError):  # a fix or rule building a bad node
        cst.SimpleWhitespace("x")
    assert seen
    module = parse_module(SOURCE)
    assert module.with_changes(header=[]).code != SOURCE  # nodes built from a parsed tree work as usual


def test_with_another_thread_running_every_node_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _validations(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        parse_module(SOURCE)
    finally:
        stop.set()
        other.join()
    assert len(seen) > 100
