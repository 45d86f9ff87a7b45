"""Step conditions written as a call of a predicate of the same file.

``def should_step(batch_idx, n_batches, loader): return (batch_idx + 1) % n_batches == 0 or
(batch_idx + 1) == len(loader)`` and then ``if should_step(i, accum, loader):`` is the accumulation
boundary as surely as the test written out. A test that calls such a function means the expression
it returns, with the call's arguments in place of the parameters: ``predicate_value`` gives that
expression, and the guard reader reads it instead of the call (which stays the test the findings
point at).

Only what the function's text settles is read: one function of that name in the file, called by
its plain name, whose body (past a docstring and ``if <bad argument>: raise ...`` checks) binds
local names once each and returns one expression. Methods, ``*args``, lambdas and comprehensions
(their own names) are left alone.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

import libcst as cst

from loopcheck.model.syntax import last_small

_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.NamedExpr)


def predicate_test(test: cst.BaseExpression, functions: Mapping[str, list[cst.FunctionDef]]
                   ) -> cst.BaseExpression | None:
    """What an ``if`` test means when it calls such a predicate, negated or not (``if not
    should_step(i, n): continue``); None for any other test."""
    kind = type(test)
    if kind is cst.Call:
        return predicate_value(test, functions)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not and type(test.expression) is cst.Call:
        value = predicate_value(test.expression, functions)
        if value is None:
            return None
        negated = copy.copy(test)
        object.__setattr__(negated, "expression", value)
        return negated
    return None


def predicate_value(call: cst.BaseExpression, functions: Mapping[str, list[cst.FunctionDef]]
                    ) -> cst.BaseExpression | None:
    """What ``call`` returns when it calls a one-expression predicate of the file, its parameters
    bound to the call's arguments (``None`` for anything else)."""
    if type(call) is not cst.Call or type(call.func) is not cst.Name:
        return None
    defs = functions.get(call.func.value, [])
    if len(defs) != 1:
        return None
    returned = _returned_with_locals(defs[0])
    if returned is None:
        return None
    bound = _bound_parameters(defs[0].params, call)
    if bound is None:
        return None
    value, local = returned
    names = dict(bound)
    for name, expr in local:  # `is_final = batch_index + 1 == batch_count` before `return a or is_final`
        substituted = _substituted(expr, names)
        if substituted is None:
            return None
        names[name] = substituted
    return _substituted(value, names)


def _returned_with_locals(fn: cst.FunctionDef) -> tuple[cst.BaseExpression, list[tuple[str, cst.BaseExpression]]] | None:
    """The expression ``fn`` returns and the names its body binds before (each once, in order)."""
    body = fn.body
    if type(body) is not cst.IndentedBlock or fn.asynchronous is not None or fn.decorators:
        return None
    local: list[tuple[str, cst.BaseExpression]] = []
    statements = list(body.body)
    for i, stmt in enumerate(statements):
        if type(stmt) is cst.If and stmt.orelse is None and type(last_small(stmt.body)) is cst.Raise \
                and _only_raises(stmt.body):
            continue  # `if accumulation < 1: raise ValueError(...)`: a check of the arguments
        if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        kind = type(small)
        if kind is cst.Expr and i == 0 and type(small.value) in (cst.SimpleString, cst.ConcatenatedString):
            continue  # the docstring
        if kind is cst.Return:
            return (small.value, local) if small.value is not None and i == len(statements) - 1 else None
        if kind is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
            name = small.targets[0].target.value
            if any(name == bound for bound, _ in local):
                return None
            local.append((name, small.value))
            continue
        return None
    return None


def _only_raises(body: cst.BaseSuite) -> bool:
    statements = body.body if type(body) is cst.IndentedBlock else [body]
    return len(statements) == 1 and type(statements[0]) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) \
        and all(type(s) is cst.Raise for s in statements[0].body)


def _bound_parameters(params: cst.Parameters, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Parameter name -> the argument (or default) it takes in ``call``; None where that is not plain."""
    if params.posonly_params or type(params.star_arg) is cst.Param or params.star_kwarg:  # `*args`, `**kw`
        return None
    ordered = list(params.params)
    by_name = {p.name.value: p for p in (*ordered, *params.kwonly_params)}
    bound: dict[str, cst.BaseExpression] = {}
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > len(ordered):
        return None
    for param, arg in zip(ordered, positional):
        bound[param.name.value] = arg.value
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value not in by_name or arg.keyword.value in bound:
                return None
            bound[arg.keyword.value] = arg.value
    for name, param in by_name.items():
        if name not in bound:
            if param.default is None:
                return None
            bound[name] = param.default
    return bound


def _substituted(expr: cst.BaseExpression, names: Mapping[str, cst.BaseExpression]) -> cst.BaseExpression | None:
    """``expr`` with each plain name of ``names`` replaced by its value (new nodes only on the path to a
    replaced name: they have no place in the file, like the model's other composed nodes); None
    where ``expr`` binds names of its own."""
    if type(expr) is cst.Name:
        return names.get(expr.value, expr)
    if isinstance(expr, _SCOPES):
        return None
    changes: dict[str, object] = {}
    for f in dataclasses.fields(expr):
        if f.name in ("lpar", "rpar") or type(expr) is cst.Attribute and f.name == "attr" \
                or type(expr) is cst.Arg and f.name == "keyword":
            continue
        value = getattr(expr, f.name, None)
        if isinstance(value, cst.CSTNode):
            new = _substituted(value, names)  # type: ignore[arg-type]
            if new is None:
                return None
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, (tuple, list)) and any(isinstance(v, cst.CSTNode) for v in value):
            items = [_substituted(v, names) if isinstance(v, cst.CSTNode) else v for v in value]  # type: ignore[arg-type]
            if any(i is None for i in items):
                return None
            if any(i is not v for i, v in zip(items, value)):
                changes[f.name] = type(value)(items)
    if not changes:
        return expr
    node = copy.copy(expr)  # no constructor: a node of a tree built from `ast` lacks fields it would check
    for name, value in changes.items():
        object.__setattr__(node, name, value)
    return node
