"""The project facts' walk of ``ast`` nodes: the stdlib's order and nodes, without expression contexts."""

from __future__ import annotations

import ast
import glob
from pathlib import Path

import pytest

from loopcheck.project.walk import children, walk

_SOURCES = sorted(glob.glob(str(Path(__file__).parent / "fixtures" / "**" / "*.py"), recursive=True))[:40]
_MORE = '''
import a.b as c
from . import d
global g
def f(x, /, y=1, *args, z: int = 2, **kw) -> "T":
    nonlocal_ = [i async for i in y if i] if x else {k: v for k, v in kw.items()}
    del x[0], y.z
    with open(p) as (q, r), s:
        pass
    try:
        raise E from None
    except (A, B) as e:
        yield from e
    else:
        lambda q=1: (yield)
    finally:
        assert f"{x!r:>{y}}", b"\\x00"
match point:
    case Point(x=0, y=yy) | [1, *rest] | {"k": _, **others} if yy:
        pass
class K(Base, metaclass=M):
    @property
    def p(self): return self.q[1:2, ...]
'''


@pytest.mark.parametrize("source", [_MORE, *(Path(p).read_text(encoding="utf-8", errors="replace")
                                              for p in _SOURCES)])
def test_the_walk_is_the_stdlibs_without_expression_contexts(source: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        pytest.skip("not Python")
    contexts = (ast.Load, ast.Store, ast.Del)
    assert walk(tree) == [n for n in ast.walk(tree) if not isinstance(n, contexts)]
    for node in ast.walk(tree):
        assert children(node) == [c for c in ast.iter_child_nodes(node) if not isinstance(c, contexts)]
