"""The schedulers a project function returns, written as its caller would have written them.

``def build_scheduler(optimizer, args): return CosineAnnealingLR(optimizer, T_max=args.epochs)``
returns a scheduler whose horizon is what the caller passes as ``args``. The function's facts keep
the constructor call as text, each of the function's parameters in it replaced by a marker of its
position (``CosineAnnealingLR(\\x000\\x00, T_max=\\x001\\x00.epochs)``); ``as_called`` puts the
caller's arguments in their places, so that the caller's file reads the horizon as if it had built
the scheduler itself. Where the text names anything else the caller cannot see (a module constant,
a local assigned twice, a parameter's default), no text is kept: the horizon stays unknown.

``own_factory`` reads a function (or method) of the checked file itself the same way: there the
module's names are the caller's too (``T_max=EPOCHS``, ``self.args.epochs`` in a method that the
same object calls), so they stay as written.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from collections.abc import Collection, Mapping
from functools import lru_cache

from loopcheck.patterns import Pattern
from loopcheck.project.flow import bound_once, bound_targets
from loopcheck.project.walk import parsed
from loopcheck.project.walk import last_name, own_nodes, walk

# Constructors of a learning-rate schedule, by the last part of the name called
# (`torch.optim.lr_scheduler.CosineAnnealingLR`, `get_linear_schedule_with_warmup`, a project's
# `WarmupCosineLR`, `CosineAnnealingWarmRestarts`, `ReduceLROnPlateau`: a factory may return any of them)
SCHEDULE = Pattern(r"(?:LR|Scheduler|Schedule|_schedule_with_warmup|WarmRestarts|LROnPlateau)$|^get_scheduler$")
# The same, in a function's text: whether it may return one (a superset: ``returned`` decides)
SCHEDULE_TEXT = Pattern(r"(?:LR|Scheduler|Schedule|_schedule_with_warmup|WarmRestarts|LROnPlateau|get_scheduler)\s*\(")
# A function that restores a run saved before (`load`, `load_checkpoint`, `resume_from`, `utils.restore`):
# the scheduler it gives back is the one the same code built and saved
RESUME = Pattern(r"(?:^|[._])(?:load|resume|restore)", re.I)
_MARK = Pattern("\x00([0-9]+)\x00")
_MAX_DEPTH = 3  # locals followed through their single assignment


def returned(nodes: list[ast.AST], index: Mapping[str, int], kept: Collection[str] = (),
             position: int | None = None) -> tuple[str, ...]:
    """The scheduler constructor each ``return`` of a function hands back, as marked text (see the
    module's doc); () where some return is anything else or names what the caller cannot see.
    ``nodes``: the function's own nodes; ``index``: its parameters' positions; ``kept``: names the
    caller sees as they are (none for a function of another module); ``position``: read element
    ``position`` of the tuple every return hands back (``return optimizer, scheduler``) instead."""
    returns: list[ast.expr | None] = []
    for sub in nodes:
        # other bindings: not followed (a comprehension's names are its own: `bound_once` keeps them
        # unreadable, so a constructor argument that reads one is not read)
        if isinstance(sub, (ast.For, ast.AsyncFor, ast.NamedExpr, ast.withitem,
                            ast.ExceptHandler, ast.Global, ast.Nonlocal, ast.Delete)):
            return ()
        if isinstance(sub, ast.Return):
            returns.append(sub.value)
    if position is not None:
        elements: list[ast.expr | None] = []
        for value in returns:
            if not isinstance(value, ast.Tuple) or len(value.elts) <= position or any(
                    isinstance(e, ast.Starred) for e in value.elts):
                return ()  # `return None`, `return pair`: what that element holds is not read
            elements.append(value.elts[position])
        returns = elements
    # name -> its value where `name = value` is its only binding; `args.epochs = ...` rebinds `args`
    assigned = bound_once(nodes)
    if not assigned.keys().isdisjoint(index):
        # `epochs = epochs * steps_per_epoch`, `args.epochs *= len(loader)`: the scheduler is given
        # something else than what the caller passed
        return ()
    found = []
    branches: dict[str, list[ast.expr]] | None = None
    for value in [v for r in returns for v in _values(r, index, nodes)]:
        if _none(value):
            continue  # no scheduler in that configuration: nothing to step there
        if not (isinstance(value, ast.Call) and SCHEDULE.search(last_name(value.func))):
            return ()
        if branches is None:
            branches = _branch_values(nodes, assigned, index)  # read only for a function that builds one
        value = _closure_given(value, nodes, index, assigned)
        for variant in _variants(value, branches, assigned):
            written = _constructed(value, index, variant, kept)
            if written is None:
                return ()
            found.append(ast.unparse(written))
    return tuple(dict.fromkeys(found))


_MAX_VARIANTS = 4  # constructors one return may stand for, one per combination of branch values


def _branch_values(nodes: list[ast.AST], assigned: Mapping[str, ast.expr | None],
                   index: Mapping[str, int]) -> dict[str, list[ast.expr]]:
    """Name -> its values, for each local bound only by plain ``name = value`` statements, two to
    four of them (``if opt.scheduler_steps is None: steps = opt.total_steps`` / ``else: steps =
    opt.scheduler_steps``): each value is a configuration of its own."""
    values: dict[str, list[ast.expr]] = {}
    for sub in nodes:
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            name = sub.targets[0].id
            if name in assigned and assigned[name] is None and name not in index:
                values.setdefault(name, []).append(sub.value)
    for sub in nodes:  # bound any other way too (`+=`, a tuple, a loop): not read
        for target in bound_targets(sub):
            if not (isinstance(sub, ast.Assign) and isinstance(target, ast.Name)):
                for name in walk(target):
                    if isinstance(name, ast.Name):
                        values.pop(name.id, None)
    return {name: found for name, found in values.items() if 2 <= len(found) <= _MAX_VARIANTS}


def _variants(call: ast.Call, branches: Mapping[str, list[ast.expr]], assigned: Mapping[str, ast.expr | None]
              ) -> list[Mapping[str, ast.expr | None]]:
    """``assigned`` once for each combination of the branch values of the locals ``call``'s length
    arguments name (just ``assigned`` where they name none, or where the combinations are too many)."""
    # the lengths only: the optimizer (the first argument) says no unit
    lengths = [*call.args[1:], *(k.value for k in call.keywords if k.arg != "optimizer")]
    used = [name for name in dict.fromkeys(n.id for arg in lengths for n in walk(arg) if isinstance(n, ast.Name))
            if name in branches]
    combos: list[dict[str, ast.expr | None]] = [dict(assigned)]
    for name in used:
        combos = [{**combo, name: value} for combo in combos for value in branches[name]]
        if len(combos) > _MAX_VARIANTS:
            return [assigned]
    return combos


def returned_in_tuples(nodes: list[ast.AST], index: Mapping[str, int], kept: Collection[str] = ()
                       ) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """(position, ``returned`` at that position) for each element of the tuples every ``return``
    hands back that holds a scheduler (``return optimizer, scheduler``: ``((1, ("...",)),)``)."""
    sizes = {len(n.value.elts) for n in nodes if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)}
    if len(sizes) != 1 or not any(isinstance(n, ast.Call) and SCHEDULE.search(last_name(n.func)) for n in nodes):
        return ()  # no tuple returned, tuples of several sizes, or no scheduler built
    found = []
    for position in range(sizes.pop()):
        schedules = returned(nodes, index, kept, position)
        if schedules:
            found.append((position, schedules))
    return tuple(found)


def _values(returned: ast.expr | None, index: Mapping[str, int], nodes: list[ast.AST]) -> list[ast.expr | None]:
    """What a ``return`` may hand back: its value, or each value a local it returns is given
    (``scheduler = None`` / ``if ...: scheduler = CosineAnnealingLR(...)`` ... ``return scheduler``);
    [None] where the local is bound otherwise too (``scheduler, x = ...``, ``+=``)."""
    if not isinstance(returned, ast.Name) or returned.id in index:
        return [returned]
    name = returned.id
    values: list[ast.expr | None] = []
    for sub in nodes:
        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
            sub, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id == name and isinstance(sub, ast.Assign):
                values.append(sub.value)
            elif any(isinstance(n, ast.Name) and n.id == name for n in walk(target)):
                return [returned]  # not a plain `name = value`: what it holds is not read
    return values or [returned]


# Schedules that call a function of the step count, which may close over the factory's lengths
_SCHEDULE_FUNCTIONS = ("LambdaLR", "MultiplicativeLR")


def _closure_given(call: ast.Call, nodes: list[ast.AST], index: Mapping[str, int],
                   assigned: Mapping[str, ast.expr | None]) -> ast.Call:
    """``LambdaLR(optimizer, lr_lambda)`` where ``lr_lambda`` is defined inside the factory (a nested
    ``def`` or a ``lambda``) and reads the factory's parameters or locals (``num_training_steps``,
    ``num_fintune_steps = int(num_training_steps * finetune_prop)``): written as ``LambdaLR(optimizer,
    partial("lr_lambda", num_training_steps, ...))``, the lengths it closes over handed to it the way a
    caller hands them (``partial(warmup_cosine, total=args.epochs)``), so that the caller's file reads
    them. ``call`` itself where the function reads none of them (``lambda step: 0.95 ** step``)."""
    if last_name(call.func) not in _SCHEDULE_FUNCTIONS:
        return call
    fn = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "lr_lambda"), None)
    if isinstance(fn, ast.Lambda):
        body: list[ast.AST] = [fn.body]
        own = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        label = "lambda"
    elif isinstance(fn, ast.Name):
        defs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn.id]
        if len(defs) != 1:
            return call
        body = list(defs[0].body)
        own = {a.arg for a in [*defs[0].args.posonlyargs, *defs[0].args.args, *defs[0].args.kwonlyargs]}
        own |= {n.id for b in body for n in walk(b) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        label = fn.id
    else:
        return call
    outer = {name for name in [*index, *assigned] if name not in own}
    read: dict[str, ast.expr] = {}
    for b in body:
        _read_from(b, outer, read)
    if not read:
        return call
    given = ast.Call(func=ast.Name(id="partial", ctx=ast.Load()),
                     args=[ast.Constant(value=label), *read.values()], keywords=[])
    rebuilt = copy.copy(call)
    if len(call.args) > 1:
        rebuilt.args = [call.args[0], given, *call.args[2:]]
    else:
        rebuilt.keywords = [ast.keyword(arg=k.arg, value=given) if k.arg == "lr_lambda" else k for k in call.keywords]
    return rebuilt


def _read_from(node: ast.AST, outer: Collection[str], read: dict[str, ast.expr]) -> None:
    """Each whole expression of ``node`` that reads one of the ``outer`` names (``args.epochs``,
    ``cfg["epochs"]``, ``num_training_steps``), by its text."""
    chain = node.func if isinstance(node, ast.Call) else node
    loaded = isinstance(getattr(chain, "ctx", None), ast.Load)
    if isinstance(chain, (ast.Name, ast.Attribute, ast.Subscript)) and loaded:
        root = chain
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id in outer and (chain is node or isinstance(chain, ast.Attribute)):
            read.setdefault(ast.unparse(node), copy.deepcopy(node))  # type: ignore[arg-type]
            return
    for child in ast.iter_child_nodes(node):
        _read_from(child, outer, read)


def _none(value: ast.expr | None) -> bool:
    return value is None or isinstance(value, ast.Constant) and value.value is None


def _constructed(call: ast.Call, index: Mapping[str, int], assigned: Mapping[str, ast.expr | None],
                 kept: Collection[str], depth: int = 0) -> ast.Call | None:
    """The constructor as the caller would write it, an argument that names what the caller cannot
    see given as ``None`` (``max_lr=[g["lr"] for g in optimizer.param_groups]``, ``schedulers=[warmup,
    cosine]`` with ``warmup`` assigned in two branches): the rule reads only the lengths, and a length
    that is ``None`` has no unit. None where the positions of the arguments are not known (``*args``),
    or where ``**kwargs`` comes with nothing but the optimizer. Beside arguments the call names, a
    ``**params`` of extra settings is left out: a length it could hold is one the call does not name
    (Python refuses a keyword given twice), so the lengths the call names are still read."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if any(k.arg is None for k in call.keywords):
        named = [k for k in call.keywords if k.arg is not None]
        if len(call.args) + len(named) < 2:
            return None  # `CosineAnnealingLR(optimizer, **kwargs)`: its lengths are all in what the caller cannot see
        call = ast.Call(func=call.func, args=call.args, keywords=named)
    whole = _written(call, index, assigned, 0, kept)
    if whole is not None:
        return whole  # type: ignore[return-value]
    head = _written(ast.Call(func=call.func, args=[], keywords=[]), index, assigned, 0, kept)
    if not isinstance(head, ast.Call):
        return None  # the class itself is not the caller's to name

    def each(value: ast.expr) -> ast.expr:
        written = _written(value, index, assigned, 0, kept)  # type: ignore[arg-type]
        if written is not None:
            return written  # type: ignore[return-value]
        if isinstance(value, (ast.List, ast.Tuple)):
            # `SequentialLR(optimizer, [warmup, cosine], milestones=[...])`: each schedule as the caller
            # would write it, over an optimizer the caller cannot see
            return type(value)(elts=[each(e) for e in value.elts], ctx=ast.Load())
        schedule = assigned.get(value.id) if isinstance(value, ast.Name) else value
        # (not past a few levels: `scheduler = GradualWarmupScheduler(..., after_scheduler=scheduler)`)
        if isinstance(schedule, ast.Call) and SCHEDULE.search(last_name(schedule.func)) and depth < _MAX_DEPTH:
            inner = _constructed(schedule, index, assigned, kept, depth + 1)
            return inner if inner is not None else ast.Constant(value=None)
        return ast.Constant(value=None)

    head.args = [each(a) for a in call.args]
    head.keywords = [ast.keyword(arg=k.arg, value=each(k.value)) for k in call.keywords]
    return head


def _written(call: ast.Call, index: Mapping[str, int], assigned: Mapping[str, ast.expr | None],
             depth: int, kept: Collection[str] = ()) -> ast.expr | None:
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
            if node.id in kept:
                return node
            value = assigned.get(node.id)
            if depth < _MAX_DEPTH and value is not None:
                inner = _written(value, index, assigned, depth + 1, kept)  # type: ignore[arg-type]
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


@lru_cache(maxsize=256)
def own_factory(text: str, method: bool, position: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parameters (a method's without ``self``) and the returned schedulers (as ``returned``
    marks them; those at ``position`` of the tuples it returns, if given) of a function of the
    checked file, given its text; ((), ()) where it returns none.
    A name the function neither takes nor binds is the module's, which the caller sees alike; so is
    a method's ``self`` where the same object calls it (``self.scheduler = self.build_scheduler()``)."""
    tree = parsed(textwrap.dedent(text))
    if tree is None:
        return (), ()
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.args.vararg is not None:
        return (), ()  # a `*args` parameter takes the positions after it, which the caller's mapping does not know
    params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
    if method != (params[:1] == ["self"]):
        return (), ()  # `fn(...)` of a method, `self.fn(...)` of a static one: not read
    params = params[1:] if method else params
    index = {name: i for i, name in enumerate(params)}
    nodes = own_nodes(node)
    bound = set(bound_once(nodes))
    for sub in nodes:
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(sub.name)  # a schedule function defined inside reads the factory's locals
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in sub.names)
    kept = {n.id for n in nodes if isinstance(n, ast.Name) and n.id not in index and n.id not in bound}
    if method:
        kept.add("self")
    return tuple(params), returned(nodes, index, kept, position)


def as_called(marked: str, args: Mapping[int, str]) -> str | None:
    """``marked`` with the caller's argument texts in place (None where one is not passed). A
    parameter not passed that is the step to resume from (``last_epoch``, left to its default in
    ``LambdaLR(optimizer, lr_lambda, last_epoch)``) or ``verbose`` is written ``None``: no length."""
    missing = False

    def put(match: re.Match[str]) -> str:
        nonlocal missing
        head = marked[:match.start()].rstrip()
        before, after = head[-1:], marked[match.end():].lstrip()[:1]
        # a whole argument (`T_max=<marker>`, not `a == <marker>`)
        whole = (before in ("(", ",") or before == "=" and head[-2:-1] not in ("=", "!", "<", ">")) \
            and after in (",", ")")
        text = args.get(int(match.group(1)))
        if text is None:
            if whole and _depth(head) == 1 and _no_length(head):
                return "None"
            missing = True
            return ""
        return text if whole or _primary(text) else f"({text})"

    text = _MARK.sub(put, marked)
    return None if missing else text


# Arguments of a scheduler constructor that say nothing of its length
_NO_LENGTH_KEYWORDS = ("last_epoch", "verbose")
_KEYWORD_BEFORE = Pattern(r"(\w+)\s*=$")
_LAST_EPOCH_THIRD = ("LambdaLR", "MultiplicativeLR")  # (optimizer, lr_lambda, last_epoch)


def _no_length(head: str) -> bool:
    """The argument that ``head`` (the constructor's text up to it) is about to give is no length:
    ``last_epoch=`` or ``verbose=``, or the third positional argument of ``LambdaLR``."""
    keyword = _KEYWORD_BEFORE.search(head)
    if keyword is not None:
        return keyword.group(1) in _NO_LENGTH_KEYWORDS
    name = head.split("(", 1)[0].strip().rsplit(".", 1)[-1]
    if name not in _LAST_EPOCH_THIRD:
        return False
    return _brackets(head.split("(", 1)[1] if "(" in head else "")[1] == 2


def _depth(text: str) -> int:
    """How many brackets are open at the end of ``text`` (quoted text left out)."""
    return _brackets(text)[0]


def _brackets(text: str) -> tuple[int, int]:
    """How many brackets are open at the end of ``text``, and how many commas stand outside every
    bracket (quoted text left out)."""
    depth, commas, quote = 0, 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            commas += 1
    return depth, commas


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

