"""The schedulers a project function returns, written as its caller would have written them.

``def build_scheduler(optimizer, args): return CosineAnnealingLR(optimizer, T_max=args.epochs)``
returns a scheduler whose horizon is what the caller passes as ``args``. The function's facts keep
the constructor call as text, each of the function's parameters in it replaced by a marker of its
position (``CosineAnnealingLR(\\x000\\x00, T_max=\\x001\\x00.epochs)``); ``as_called`` puts the
caller's arguments in their places, so that the caller's file reads the horizon as if it had built
the scheduler itself. Where the text names anything else the caller cannot see (a module constant,
a local assigned twice, a parameter's default), no text is kept: the horizon stays unknown.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Mapping

from loopcheck.project.flow import bound_once
from loopcheck.project.walk import last_name

# Constructors of a learning-rate schedule, by the last part of the name called
# (`torch.optim.lr_scheduler.CosineAnnealingLR`, `get_linear_schedule_with_warmup`, a project's `WarmupCosineLR`)
SCHEDULE = re.compile(r"(?:LR|Scheduler|Schedule|_schedule_with_warmup)$|^get_scheduler$")
# The same, in a function's text: whether it may return one (a superset: ``returned`` decides)
SCHEDULE_TEXT = re.compile(r"(?:LR|Scheduler|Schedule|_schedule_with_warmup|get_scheduler)\s*\(")
_MARK = re.compile("\x00([0-9]+)\x00")
_MAX_DEPTH = 3  # locals followed through their single assignment


def returned(nodes: list[ast.AST], index: Mapping[str, int]) -> tuple[str, ...]:
    """The scheduler constructor each ``return`` of a function hands back, as marked text (see the
    module's doc); () where some return is anything else or names what the caller cannot see.
    ``nodes``: the function's own nodes; ``index``: its parameters' positions."""
    returns: list[ast.expr | None] = []
    for sub in nodes:
        if isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr, ast.withitem,
                            ast.ExceptHandler, ast.Global, ast.Nonlocal, ast.Delete)):
            return ()  # other bindings: not followed
        if isinstance(sub, ast.Return):
            returns.append(sub.value)
    # name -> its value where `name = value` is its only binding; `args.epochs = ...` rebinds `args`
    assigned = bound_once(nodes)
    if not assigned.keys().isdisjoint(index):
        # `epochs = epochs * steps_per_epoch`, `args.epochs *= len(loader)`: the scheduler is given
        # something else than what the caller passed
        return ()
    found = []
    for value in returns:
        if isinstance(value, ast.Name) and value.id not in index:
            value = assigned.get(value.id)  # `scheduler = CosineAnnealingLR(...)` ... `return scheduler`
        if not (isinstance(value, ast.Call) and SCHEDULE.search(last_name(value.func))):
            return ()
        written = _written(value, index, assigned, 0)
        if written is None:
            return ()
        found.append(ast.unparse(written))
    return tuple(found)


def _written(call: ast.Call, index: Mapping[str, int], assigned: Mapping[str, ast.expr | None],
             depth: int) -> ast.expr | None:
    """A copy of ``call`` with parameters marked and locals replaced by their values, or None."""
    class Marker(ast.NodeTransformer):
        failed = False

        def visit_Call(self, node: ast.Call) -> ast.AST:
            # a called name (`len`, `int`, `math.ceil`, the scheduler class) is the caller's too
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            if not isinstance(node.func, (ast.Name, ast.Attribute)) or _root(node.func) in index:
                node.func = self.visit(node.func)
            return node

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in index:
                return ast.Name(id=f"\x00{index[node.id]}\x00", ctx=ast.Load())
            value = assigned.get(node.id)
            if depth < _MAX_DEPTH and value is not None:
                inner = _written(value, index, assigned, depth + 1)  # type: ignore[arg-type]
                if inner is not None:
                    return inner
            self.failed = True
            return node

        def generic_visit(self, node: ast.AST) -> ast.AST:
            if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                                 ast.Starred, ast.NamedExpr)):
                self.failed = True  # names bound inside the expression: not followed
                return node
            return super().generic_visit(node)

    marker = Marker()
    if isinstance(call, ast.Call) and any(k.arg is None for k in call.keywords):
        return None  # `**kwargs`: the horizon may be in it
    written = marker.visit(copy.deepcopy(call))
    return None if marker.failed else written


def as_called(marked: str, args: Mapping[int, str]) -> str | None:
    """``marked`` with the caller's argument texts in place (None where one is not passed)."""
    missing = False

    def put(match: re.Match[str]) -> str:
        nonlocal missing
        text = args.get(int(match.group(1)))
        if text is None:
            missing = True
            return ""
        head = marked[:match.start()].rstrip()
        before, after = head[-1:], marked[match.end():].lstrip()[:1]
        # a whole argument (`T_max=<marker>`, not `a == <marker>`)
        whole = (before in ("(", ",") or before == "=" and head[-2:-1] not in ("=", "!", "<", ">")) \
            and after in (",", ")")
        return text if whole or _primary(text) else f"({text})"

    text = _MARK.sub(put, marked)
    return None if missing else text


def _primary(text: str) -> bool:
    """``args.epochs``, ``len(loader)``, ``cfg["epochs"]``: binds tighter than any operator around it."""
    try:
        expr = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return isinstance(expr, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) or isinstance(
        expr, ast.Constant) and not isinstance(expr.value, (int, float, complex))


def _root(expr: ast.expr) -> str:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else ""

