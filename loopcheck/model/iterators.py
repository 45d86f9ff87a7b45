"""Fresh iterators and the batches taken from them: ``iter(loader)`` and ``loader.__iter__()`` start
a new pass over ``loader``; ``next(...)`` / ``.__next__()`` / ``.next()`` take one item from it."""

from __future__ import annotations

import libcst as cst

from loopcheck.model.syntax import func_name, method, positional


def iterated(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``loader`` in ``iter(loader)`` or ``loader.__iter__()``: what a new iterator goes over."""
    if not isinstance(expr, cst.Call):
        return None
    called = method(expr)
    if called is not None:
        return called[0] if called[1] == "__iter__" and not expr.args else None
    args = positional(expr)
    return args[0] if args and func_name(expr) == "iter" else None


def taken_from(call: cst.Call) -> cst.BaseExpression | None:
    """``it`` in ``next(it)``, ``it.__next__()`` or ``it.next()`` (old DataLoader iterators)."""
    called = method(call)
    if called is not None:
        return called[0] if called[1] in ("__next__", "next") and not call.args else None
    args = positional(call)
    return args[0] if args and func_name(call) == "next" else None


def first_batch_of(call: cst.Call) -> cst.BaseExpression | None:
    """``loader`` in ``next(iter(loader))``, ``iter(loader).__next__()``, ``next(loader.__iter__())``:
    one item taken from an iterator made for it."""
    return iterated(taken_from(call))
