"""A loop-less method that the file calls once per iteration of a loop, on an object it builds.

``GAN.step(self, data)`` back-propagates and steps; ``gan = GAN(...)`` then ``for data in loader:
gan.step(data)`` runs it once per batch. The method is then one iteration of that loop: a gradient it
never clears adds up from one call to the next, unless the calling loop clears it (or hands the object
to code that may).

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module(
...     "class GAN:\\n    def step(self, x):\\n        self.model(x).backward()\\n        self.opt.step()\\n"
...     "gan = GAN()\\nfor x in loader:\\n    gan.step(x)\\n"))
>>> [call_site.func.value.value for call_site in per_batch_calls(m.module, m.index, m.index.functions["step"][0])]
['gan']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.syntax import children, dotted, func_name, last_part, walk

if TYPE_CHECKING:
    from loopcheck.model.index import Index


def per_batch_calls(module: cst.Module, index: Index, fn: cst.FunctionDef) -> list[cst.Call]:
    """The calls of method ``fn`` on objects of its class built in the file (every binding of the
    name is ``Cls(...)``), where every such call sits in a loop that clears no gradient and hands the
    object to no other call, and the object's method is used nowhere but in such calls. Empty where
    any of that does not hold."""
    name = fn.name.value
    if name not in index.attributes:
        return []  # no `x.<name>` anywhere in the file: nothing calls it on an object
    cls = _class_of(module, fn)
    if cls is None:
        return []
    instances = {n for n, values in index.values.items()
                 if values and all(isinstance(v, cst.Call) and last_part(func_name(v) or "") == cls.name.value
                                   for v in values)}
    if not instances:
        return []
    found: list[cst.Call] = []
    for attribute, loop, call in _attributes(module, None, None):
        if attribute.attr.value != name:
            continue
        receiver = dotted(attribute.value)
        if receiver in ("self", "cls"):
            return []  # called inside its class too: read there
        if receiver not in instances:
            continue
        if call is None or loop is None or not _clears_nothing(loop, receiver):  # type: ignore[arg-type]
            return []  # handed on as a callback, called once, or beside a clearing in its loop
        found.append(call)
    return found


def _class_of(module: cst.Module, fn: cst.FunctionDef) -> cst.ClassDef | None:
    for node in walk(module):
        if isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock) \
                and any(stmt is fn for stmt in node.body.body):
            return node
    return None


def _attributes(node: cst.CSTNode, loop: cst.For | cst.While | None, call: cst.Call | None
                ) -> list[tuple[cst.Attribute, cst.For | cst.While | None, cst.Call | None]]:
    """Every attribute under ``node`` with the innermost loop around it in its own function and the
    call it is the function of (``gan.step`` of ``gan.step(x)``), if any."""
    out: list[tuple[cst.Attribute, cst.For | cst.While | None, cst.Call | None]] = []
    stack = [(node, loop, call)]
    while stack:
        current, around, calling = stack.pop()
        kind = type(current)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.Attribute:
            out.append((current, around, calling))  # type: ignore[arg-type]
        looping = kind is cst.For or kind is cst.While
        for child in children(current):
            inner = around
            if type(child) is cst.FunctionDef or type(child) is cst.Lambda:
                inner = None
            elif looping and child is current.body:  # type: ignore[attr-defined]
                inner = current  # type: ignore[assignment]
            called = kind is cst.Call and child is current.func  # type: ignore[attr-defined]
            stack.append((child, inner, current if called else None))
    return out


def _clears_nothing(loop: cst.For | cst.While, receiver: str) -> bool:
    """No ``zero_grad`` call, no ``.grad`` written, and the object handed to no call, in ``loop``."""
    for node in walk(loop.body):
        if isinstance(node, cst.Call):
            if last_part(func_name(node) or "") == "zero_grad":
                return False
            if any(dotted(a.value) == receiver for a in node.args):
                return False
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Attribute) and t.attr.value == "grad" for t in targets):
                return False
    return True
