"""Learning rates a loop sets by hand from a schedule function of the file.

``lr = get_lr(global_step, max_lr, len(train_loader) * epochs)``, then ``optimizer.param_groups[0]['lr'] =
lr`` (or ``for group in optimizer.param_groups: group["lr"] = lr``) is a schedule with no scheduler
object: the function's body divides its step count by its length (``(it - warmup) / (max_steps -
warmup)``) or compares them (``if it > max_steps:``). Which argument is the step count and which the
horizon is read from that body; the rule then compares what each counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from loopcheck.model.index import Index
from loopcheck.model.syntax import func_name, keyword, lines, names_in, positional, walk


@dataclass(frozen=True)
class SetRate:
    """A call of a schedule function whose value the loop gives an optimizer's parameter groups."""

    call: cst.Call
    stmt: cst.CSTNode  # the statement holding the call
    function: str
    step: cst.BaseExpression  # the argument the function counts its steps with
    horizon: cst.BaseExpression  # the argument it runs them to


def set_rates(loop_node: cst.CSTNode, index: Index) -> Iterator[SetRate]:
    """Each call of a schedule function of the file in ``loop_node`` whose value goes into ``["lr"]``."""
    calls: dict[str, tuple[cst.Call, cst.CSTNode]] = {}  # a local bound to a call, by name
    targets: list[tuple[cst.BaseExpression, cst.CSTNode]] = []  # values given to `...["lr"]`
    for node in _simple_lines(loop_node):
        for small in node.body:
            if type(small) is not cst.Assign or len(small.targets) != 1:
                continue
            target = small.targets[0].target
            if type(target) is cst.Name and type(small.value) is cst.Call:
                calls[target.value] = (small.value, node)
            elif _lr_slot(target):
                targets.append((small.value, node))
    for value, stmt in targets:
        call, at = (value, stmt) if type(value) is cst.Call else calls.get(value.value, (None, None)) \
            if type(value) is cst.Name else (None, None)
        if call is None or at is None:
            continue
        name = func_name(call)
        defs = index.functions.get(name, []) if name is not None and "." not in name else []
        if len(defs) != 1:
            continue
        found = _counted(defs[0], call)
        if found is not None:
            yield SetRate(call, at, name, *found)  # type: ignore[arg-type]


def _simple_lines(node: cst.CSTNode) -> Iterator[cst.SimpleStatementLine | cst.SimpleStatementSuite]:
    """The simple statement lines of a compound statement's bodies, nested ones included (no
    expression is walked: a large loop holds many more of those than of lines)."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            yield current  # type: ignore[misc]
            continue
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            continue  # (a nested definition runs where it is called, not here)
        found: list[cst.CSTNode] = []
        for part in ("body", "handlers", "orelse", "finalbody"):
            value = getattr(current, part, None)
            if isinstance(value, (list, tuple)):
                found.extend(value)
            elif isinstance(value, cst.BaseSuite):
                found.extend(lines(value))
            elif isinstance(value, cst.CSTNode):
                found.append(value)  # an `else:` or `elif`, an `except` clause
        stack.extend(reversed(found))  # (in the order they are written)


def _lr_slot(target: cst.BaseExpression) -> bool:
    """``optimizer.param_groups[0]['lr']``, ``group["lr"]``."""
    if type(target) is not cst.Subscript or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    return type(index) is cst.Index and type(index.value) is cst.SimpleString \
        and index.value.value[1:-1] == "lr"


def _counted(fn: cst.FunctionDef, call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(the step count, the horizon) ``call`` passes, where ``fn`` divides one parameter by another
    (``(it - warmup_steps) / (max_steps - warmup_steps)``) or, failing that, compares them (``it >
    max_steps``)."""
    params = [p.name.value for p in fn.params.params]
    divided = compared = None
    for node in walk(fn.body):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
            divided = _one_each(node.left, node.right, params)
            if divided is not None:
                break
        elif type(node) is cst.Comparison and len(node.comparisons) == 1 and type(
                node.comparisons[0].operator) in (cst.GreaterThan, cst.GreaterThanEqual):
            compared = compared or _one_each(node.left, node.comparisons[0].comparator, params)
    pair = divided or compared
    if pair is None:
        return None
    passed = [_argument(call, params, name) for name in pair]
    return (passed[0], passed[1]) if passed[0] is not None and passed[1] is not None else None


def _one_each(left: cst.BaseExpression, right: cst.BaseExpression, params: list[str]) -> tuple[str, str] | None:
    """The one parameter ``left`` reads and the other one ``right`` reads."""
    mine = [p for p in params if p in names_in(left)]
    theirs = [p for p in params if p in names_in(right)]
    if len(mine) == 1 and len(theirs) == 1 and mine != theirs:
        return mine[0], theirs[0]
    return None


def _argument(call: cst.Call, params: list[str], name: str) -> cst.BaseExpression | None:
    given = keyword(call, name)
    if given is not None:
        return given
    args = positional(call)
    position = params.index(name)
    return args[position] if position < len(args) and all(a.keyword is None and not a.star for a in
                                                          call.args[:position + 1]) else None
