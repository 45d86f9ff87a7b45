"""Step conditions written as a call of a predicate of the same file.

``def should_step(batch_idx, n_batches, loader): return (batch_idx + 1) % n_batches == 0 or
(batch_idx + 1) == len(loader)`` and then ``if should_step(i, accum, loader):`` is the accumulation
boundary as surely as the test written out. A test that calls such a function means the expression
it returns, with the call's arguments in place of the parameters: ``predicate_value`` gives that
expression, and the guard reader reads it instead of the call (which stays the test the findings
point at).

Only what the function's text settles is read: one function of that name in the file, called by
its plain name, or as ``self.name(...)`` where it is a method (``self`` dropped; ``self.accum`` in
its body stays a setting, as written) or a static method, whose body (past a docstring and
``if <bad argument>: raise ...`` checks) binds local names once each and returns one expression,
after early ``if <c>: return True`` / ``return False`` exits (read as ``c or rest`` / ``not c and
rest``: ``if accumulation_steps <= 1: return True`` then ``return (step + 1) % accumulation_steps
== 0``). The last exit may return an expression where the function then returns a constant (``if
grad_acc_steps and grad_acc_steps > 1: return iteration % grad_acc_steps == 0`` then ``return True``:
``not c or x``; before ``return False``: ``c and x``). Other decorators, ``*args``, lambdas and comprehensions (their own names) are left alone.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

import libcst as cst

from loopcheck.model.from_ast import conjunction, disjunction, negation
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
    if type(call) is not cst.Call:
        return None
    func = call.func
    if type(func) is cst.Name:
        name, method = func.value, False
    elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        name, method = func.attr.value, True  # `self._is_accumulation_boundary(step, n)`
    else:
        return None
    defs = functions.get(name, [])
    if len(defs) != 1:
        return None
    skip = _skipped_parameters(defs[0], method)
    if skip is None:
        return None
    returned = _returned_with_locals(defs[0])
    if returned is None:
        return None
    bound = _bound_parameters(defs[0].params, call, skip)
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


def _skipped_parameters(fn: cst.FunctionDef, method: bool) -> int | None:
    """How many leading parameters the call leaves unbound: 1 for ``self`` of a method called as
    ``self.name(...)``, 0 for a static method or a function called by name; None where the
    decorators or the parameters say otherwise (``@property``, ``@classmethod``, a method called by
    its plain name)."""
    decorators = [d.decorator for d in fn.decorators]
    static = len(decorators) == 1 and type(decorators[0]) is cst.Name and decorators[0].value == "staticmethod"
    if decorators and not static:
        return None
    first = fn.params.params[0].name.value if fn.params.params else None
    if static:
        return 0 if method else None
    if method:
        return 1 if first == "self" else None
    return None if first == "self" else 0


def _returned_with_locals(fn: cst.FunctionDef) -> tuple[cst.BaseExpression, list[tuple[str, cst.BaseExpression]]] | None:
    """The expression ``fn`` returns and the names its body binds before (each once, in order)."""
    body = fn.body
    if type(body) is not cst.IndentedBlock or fn.asynchronous is not None:
        return None
    local: list[tuple[str, cst.BaseExpression]] = []
    exits: list[tuple[cst.BaseExpression, bool | cst.BaseExpression]] = []  # `if c: return True`, in order
    statements = list(body.body)
    for i, stmt in enumerate(statements):
        if type(stmt) is cst.If and stmt.orelse is None:
            if type(last_small(stmt.body)) is cst.Raise and _only_raises(stmt.body):
                continue  # `if accumulation < 1: raise ValueError(...)`: a check of the arguments
            returned = _returned_bool(stmt.body)
            if returned is not None:
                exits.append((stmt.test, returned))
                continue
            value = _returned_expression(stmt.body)
            if value is not None and i == len(statements) - 2:
                exits.append((stmt.test, value))  # the last exit, read only before a constant return
                continue
            return None
        if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        kind = type(small)
        if kind is cst.Expr and i == 0 and type(small.value) in (cst.SimpleString, cst.ConcatenatedString):
            continue  # the docstring
        if kind is cst.Return:
            if small.value is None or i != len(statements) - 1:
                return None
            value = _folded(exits, small.value)
            return None if value is None else (value, local)
        if kind is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name and not exits:
            name = small.targets[0].target.value
            if any(name == bound for bound, _ in local):
                return None
            local.append((name, small.value))
            continue
        return None
    return None


def _returned_bool(body: cst.BaseSuite) -> bool | None:
    """True / False for a body that only returns that constant, None for any other."""
    statements = body.body if type(body) is cst.IndentedBlock else [body]
    if len(statements) != 1 or type(statements[0]) not in (cst.SimpleStatementLine, cst.SimpleStatementSuite) \
            or len(statements[0].body) != 1 or type(statements[0].body[0]) is not cst.Return:
        return None
    return _bool(statements[0].body[0].value)


def _returned_expression(body: cst.BaseSuite) -> cst.BaseExpression | None:
    """The expression a body returns where it is that single ``return`` of something else than a
    constant (``return iteration % grad_acc_steps == 0``)."""
    statements = body.body if type(body) is cst.IndentedBlock else [body]
    if len(statements) != 1 or type(statements[0]) not in (cst.SimpleStatementLine, cst.SimpleStatementSuite) \
            or len(statements[0].body) != 1 or type(statements[0].body[0]) is not cst.Return:
        return None
    value = statements[0].body[0].value
    return value if value is not None and _bool(value) is None else None


def _bool(expr: cst.BaseExpression | None) -> bool | None:
    if type(expr) is cst.Name and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def _folded(exits: list[tuple[cst.BaseExpression, bool | cst.BaseExpression]], last: cst.BaseExpression
            ) -> cst.BaseExpression | None:
    """The value of early exits then ``return last``: ``if c: return True`` before ``rest`` is
    ``c or rest``, ``if c: return False`` is ``not c and rest``; None where it is a constant."""
    value: cst.BaseExpression | None = last
    constant = _bool(last)
    if exits and not isinstance(exits[-1][1], bool):
        # `if c: return x` then `return True` is `not c or x`; then `return False`, `c and x`
        if constant is None:
            return None
        test, returned = exits.pop()
        value = disjunction(negation(test), returned) if constant else conjunction(test, returned)  # type: ignore[arg-type]
        constant = None
    if constant is not None:  # `...; if b: return True; return False`: the last exit decides
        if not exits or exits[-1][1] == constant:
            return None  # always the same value after the exits
        test, _ = exits.pop()
        value = test if not constant else negation(test)
    for test, result in reversed(exits):
        value = disjunction(test, value) if result else conjunction(negation(test), value)
    return value


def _only_raises(body: cst.BaseSuite) -> bool:
    statements = body.body if type(body) is cst.IndentedBlock else [body]
    return len(statements) == 1 and type(statements[0]) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) \
        and all(type(s) is cst.Raise for s in statements[0].body)


def _bound_parameters(params: cst.Parameters, call: cst.Call, skip: int) -> dict[str, cst.BaseExpression] | None:
    """Parameter name -> the argument (or default) it takes in ``call``, past the first ``skip``
    (``self``); None where that is not plain."""
    if params.posonly_params or type(params.star_arg) is cst.Param or params.star_kwarg:  # `*args`, `**kw`
        return None
    ordered = list(params.params)[skip:]
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
