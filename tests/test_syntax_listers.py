"""The child listers of model/syntax: the plain one a type starts with and the generated one it is
replaced by once met often list the same children in the same order."""

from __future__ import annotations

import libcst as cst

from loopcheck.model import syntax

SOURCE = "\n".join(f"loss_{i} = model(x[{i}], y=[a.b, c], *args, **kw) + f(g(h({i})))" for i in range(120)) + "\n"


def _nodes() -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    cst.parse_module(SOURCE).visit(Collect())
    return found


def test_plain_and_generated_listers_agree() -> None:
    nodes = _nodes()
    for table, listers in ((syntax._IS_NODE, {}), (syntax._IS_INNER, {})):
        for kind in {type(n) for n in nodes}:
            plain = syntax._lister(kind, table, listers)
            names = [f.name for f in syntax.dataclasses.fields(kind)
                     if not f.name.startswith(syntax._SKIP_FIELD) and f.type not in syntax._NEVER_NODES
                     and syntax.typing.get_origin(f.type) is not syntax.typing.Literal]
            generated = syntax._generated(names, table) if names else plain
            for node in (n for n in nodes if type(n) is kind):
                assert [id(c) for c in plain(node)] == [id(c) for c in generated(node)]


def test_a_type_met_often_gets_the_generated_lister() -> None:
    calls = [n for n in _nodes() if type(n) is cst.Call]
    assert len(calls) > syntax._COMPILE_AFTER
    listers: dict[type, object] = {}
    plain = listers[cst.Call] = syntax._lister(cst.Call, syntax._IS_NODE, listers)  # type: ignore[assignment]
    before = [plain(c) for c in calls[:syntax._COMPILE_AFTER]]
    assert listers[cst.Call] is not plain
    after = [listers[cst.Call](c) for c in calls[:syntax._COMPILE_AFTER]]  # type: ignore[operator]
    assert before == after and all(before)
