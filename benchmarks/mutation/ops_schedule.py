"""Mutation operators of the scheduler / AMP / mode / memory / zeroing family.

Each operator injects one pitfall where it really happens: a loop (``for``/``while``, not in a nested
function) that back-propagates (``.backward(``) and steps an optimizer, with names that say what an
object is (``opt``/``optim`` for an optimizer, ``sched`` for a scheduler, ``scaler`` for a
``GradScaler``) and nothing else in the file that already does what the edit removes. A mutant that
is not a real pitfall is a defect of the operator; its docstring is its precondition.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from benchmarks.mutation import edit
from benchmarks.mutation.run import Mutant

# ---------------------------------------------------------------- reading


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def _receiver(call: ast.Call) -> str:
    assert isinstance(call.func, ast.Attribute)
    return _text(call.func.value)


def _is_opt(name: str) -> bool:
    low = name.lower()
    return "opt" in low and not any(w in low for w in ("sched", "scaler", "lr", "args", "config", "cfg", "option"))


def _is_sched(name: str) -> bool:
    low = name.lower()
    return "sched" in low and "opt" not in low and "scaler" not in low


def _is_scaler(name: str) -> bool:
    return "scaler" in name.lower()


def _local_walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(current))


def _method_calls(node: ast.AST, method: str) -> list[ast.Call]:
    return [n for n in _local_walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == method]


def _statement_call(stmt: ast.AST, method: str) -> ast.Call | None:
    """The call of ``stmt`` if it is exactly ``<x>.method(...)``."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == method:
        return stmt.value
    return None


def _optimizer_steps(node: ast.AST) -> list[tuple[ast.Call, str]]:
    """(call, optimizer) of every ``opt.step()`` and ``scaler.step(opt)`` under ``node``."""
    found = []
    for call in _method_calls(node, "step"):
        who = _receiver(call)
        if _is_opt(who) and not call.args and not call.keywords:
            found.append((call, who))
        elif _is_scaler(who) and call.args and _is_opt(_text(call.args[0])):
            found.append((call, _text(call.args[0])))
    return found


def _trains(loop: ast.AST) -> bool:
    return bool(_method_calls(loop, "backward")) and bool(_optimizer_steps(loop))


_CACHE: list = [None, {}, []]  # the last tree read, its parent map and statements (every operator reads it)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    if _CACHE[0] is not tree:
        parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        _CACHE[:] = [tree, parents, [n for n in parents if isinstance(n, ast.stmt)]]
    return _CACHE[1]


def _alone(source: str, stmt: ast.stmt, tree: ast.Module) -> bool:
    """``edit.alone_on_its_lines`` for a statement, with the tree's parent map."""
    parents = _parents(tree)
    around = {id(stmt)} | {id(n) for n in ast.walk(stmt)}
    node: ast.AST = stmt
    while node in parents:
        node = parents[node]
        around.add(id(node))
    end = stmt.end_lineno or stmt.lineno
    return not any(other.lineno <= end and (other.end_lineno or other.lineno) >= stmt.lineno and id(other) not in around
                   for other in _CACHE[2])


def _block(parents: dict[ast.AST, ast.AST], stmt: ast.stmt) -> list[ast.stmt]:
    """The statement list that holds ``stmt``."""
    parent = parents[stmt]
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return [stmt]


def _innermost_loop(tree: ast.AST, node: ast.AST) -> ast.For | ast.While | None:
    """The loop around ``node`` (not beyond the function it is in)."""
    parents = _parents(tree)
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
    return None


def _in_loop(parents: dict[ast.AST, ast.AST], node: ast.AST, loop: ast.AST) -> bool:
    while node in parents:
        node = parents[node]
        if node is loop:
            return True
    return False


def _statement_of(parents: dict[ast.AST, ast.AST], node: ast.AST) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[node]
    return node


def _ascii_line(source: str, line: int) -> str | None:
    text = edit.lines_of(source)[line - 1]
    return text if text.isascii() else None


def _insert(source: str, line: int, col: int, text: str) -> str | None:
    """``source`` with ``text`` inserted at column ``col`` of ``line`` (ASCII lines only)."""
    old = _ascii_line(source, line)
    if old is None:
        return None
    return edit.replaced(source, line, line, [old[:col] + text + old[col:]])


def _replace_span(source: str, node: ast.AST, text: str) -> str | None:
    """``source`` with the one-line expression ``node`` replaced by ``text``."""
    if node.lineno != node.end_lineno:
        return None
    old = _ascii_line(source, node.lineno)
    if old is None:
        return None
    return edit.replaced(source, node.lineno, node.lineno, [old[:node.col_offset] + text + old[node.end_col_offset:]])


def _single_line(stmt: ast.stmt) -> bool:
    return stmt.lineno == stmt.end_lineno


def _scaler_disabled(tree: ast.Module) -> bool:
    """A ``GradScaler(enabled=False)`` (inert: removing its calls changes nothing)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _text(node.func).endswith("GradScaler"):
            for kw in node.keywords:
                if kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and not kw.value.value:
                    return True
    return False


def _clears_grads_by_hand(source: str) -> bool:
    return bool(re.search(r"\.grad\s*=\s*None|\.grad(\.data)?\.zero_\(|set_to_none|\.grad\s*=\s*torch\.zeros", source))


# ---------------------------------------------------------------- LC103 / LC104


def zero_grad_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC103: the file's only ``zero_grad()`` removed, where it runs in a loop that back-propagates and
    steps the optimizer it clears (or clears the model's gradients), and no gradient is cleared by hand."""
    if source.count("zero_grad") != 1:
        return
    stmts = [s for s in ast.walk(tree) if _statement_call(s, "zero_grad")]
    if len(stmts) != 1 or source.count("zero_grad") != 1 or _clears_grads_by_hand(source):
        return
    stmt = stmts[0]
    loop = _innermost_loop(tree, stmt)
    if loop is None or not _trains(loop):
        return
    who = _receiver(stmt.value)
    stepped = {opt for _, opt in _optimizer_steps(loop)}
    if _is_opt(who) and who not in stepped:
        return
    if not _alone(source, stmt, tree):
        return
    yield Mutant("LC103", stmt.lineno, f"the only {who}.zero_grad() removed", edit.without(source, stmt))


def zero_grad_moved_after_backward(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC104: ``opt.zero_grad()`` written before the backward in the same block as the backward and the
    step (every iteration steps) moved to right after the backward, so the step sees cleared gradients."""
    if "zero_grad" not in source:
        return
    parents = _parents(tree)
    for stmt in ast.walk(tree):
        zero = _statement_call(stmt, "zero_grad")
        if zero is None or not isinstance(parents.get(stmt), (ast.For, ast.While)):
            continue
        block = _block(parents, stmt)
        index = next(i for i, s in enumerate(block) if s is stmt)
        who = _receiver(zero)
        backward = step = None
        for later in block[index + 1:]:
            if backward is None and _statement_call(later, "backward"):
                backward = later
            elif backward is not None and step is None:
                steps = [c for c, opt in _optimizer_steps(later) if opt == who or not _is_opt(who)]
                if steps and _statement_call(later, "step"):
                    step = later
            if later is not stmt and _method_calls(later, "zero_grad"):
                break
        if backward is None or step is None or not _single_line(backward) or not _single_line(stmt):
            continue
        if not _alone(source, stmt, tree) or not _alone(source, backward, tree):
            continue
        moved = _insert(edit.without(source, stmt), backward.end_lineno, backward.end_col_offset,
                        f"; {_text(zero)}")
        if moved:
            yield Mutant("LC104", backward.lineno, f"{who}.zero_grad() moved between backward and step", moved)


# ---------------------------------------------------------------- LC201 / LC202 / LC203


def unscale_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC201: the file's only ``scaler.unscale_(opt)`` removed where a gradient clip follows it before
    ``scaler.step(opt)`` in the same block (the clip then sees gradients times the loss scale)."""
    if source.count("unscale_(") != 1:
        return
    stmts = [s for s in ast.walk(tree) if _statement_call(s, "unscale_")]
    if len(stmts) != 1 or source.count("unscale_(") != 1 or _scaler_disabled(tree):
        return
    stmt = stmts[0]
    parents = _parents(tree)
    loop = _innermost_loop(tree, stmt)
    if loop is None or not _method_calls(loop, "backward"):
        return
    block = _block(parents, stmt)
    index = next(i for i, s in enumerate(block) if s is stmt)
    clipped = False
    for later in block[index + 1:]:
        if any(isinstance(c, ast.Call) and _text(c.func).endswith(("clip_grad_norm_", "clip_grad_value_"))
               for c in _local_walk(later)):
            clipped = True
        if any(_is_scaler(_receiver(c)) for c in _method_calls(later, "step")):
            if clipped and _alone(source, stmt, tree):
                yield Mutant("LC201", stmt.lineno, "scaler.unscale_ before the clip removed", edit.without(source, stmt))
            return


def scaler_update_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC202: the file's only ``scaler.update()`` removed, where it runs in a loop that back-propagates
    and calls ``scaler.step(opt)`` (with the scaler not built ``enabled=False``)."""
    if "scaler" not in source.lower():
        return
    stmts = [s for s in ast.walk(tree) if _statement_call(s, "update") and _is_scaler(_receiver(s.value))]
    if len(stmts) != 1 or _scaler_disabled(tree):
        return
    stmt = stmts[0]
    who = _receiver(stmt.value)
    if source.count(f"{who}.update(") != 1:
        return
    loop = _innermost_loop(tree, stmt)
    if loop is None or not _method_calls(loop, "backward"):
        return
    if not any(_receiver(c) == who for c in _method_calls(loop, "step")):
        return
    if _alone(source, stmt, tree):
        yield Mutant("LC202", stmt.lineno, f"{who}.update() removed", edit.without(source, stmt))


def scaler_step_bypassed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC203: ``scaler.step(opt)`` made ``opt.step()`` (and the scaler's ``update()``, which would now
    fail, removed), where the loss is back-propagated through ``scaler.scale(...)`` in the same loop."""
    if "scaler" not in source.lower():
        return
    if _scaler_disabled(tree):
        return
    for stmt in ast.walk(tree):
        call = _statement_call(stmt, "step")
        if call is None or not _is_scaler(_receiver(call)) or len(call.args) != 1 or call.keywords:
            continue
        who, opt = _receiver(call), _text(call.args[0])
        loop = _innermost_loop(tree, stmt)
        if loop is None or not any(isinstance(b.func, ast.Attribute) and isinstance(b.func.value, ast.Call)
                                   and _text(b.func.value.func) == f"{who}.scale"
                                   for b in _method_calls(loop, "backward")):
            continue
        updates = [s for s in _local_walk(loop) if _statement_call(s, "update") and _receiver(s.value) == who]
        if len(updates) > 1 or not _alone(source, stmt, tree):
            continue
        mutated = edit.with_statement(source, stmt, f"{opt}.step()")
        for update in updates:
            mutated = edit.without(mutated, update)
        yield Mutant("LC203", stmt.lineno, f"{who}.step({opt}) made {opt}.step()", mutated)


# ---------------------------------------------------------------- LC302 / LC303


def _scheduler_steps(node: ast.AST) -> list[ast.Expr]:
    """``sched.step()`` statements (no argument: not ReduceLROnPlateau's ``step(metric)``)."""
    return [s for s in _local_walk(node) if (c := _statement_call(s, "step")) is not None
            and _is_sched(_receiver(c)) and not c.args and not c.keywords]


def scheduler_before_optimizer(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC302: ``sched.step()`` written after the optimizer's step in the same block moved to right before
    it (the scheduler skips its first value; PyTorch warns once)."""
    if "sched" not in source.lower():
        return
    parents = _parents(tree)
    for stmt in ast.walk(tree):
        if not _statement_call(stmt, "step") or not _optimizer_steps(stmt) or not _single_line(stmt):
            continue
        if _innermost_loop(tree, stmt) is None:
            continue
        block = _block(parents, stmt)
        index = next(i for i, s in enumerate(block) if s is stmt)
        for later in block[index + 1:]:
            if _optimizer_steps(later):
                break
            if later in _scheduler_steps_in(later) and _alone(source, later, tree) and \
                    _alone(source, stmt, tree):
                moved = _insert(edit.without(source, later), stmt.lineno, stmt.col_offset, f"{_text(later.value)}; ")
                if moved:
                    yield Mutant("LC302", stmt.lineno, f"{_text(later.value)} moved before the optimizer step", moved)
                break


def _scheduler_steps_in(stmt: ast.stmt) -> list[ast.stmt]:
    call = _statement_call(stmt, "step")
    return [stmt] if call is not None and _is_sched(_receiver(call)) and not call.args and not call.keywords else []


_EPOCH_SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "PolynomialLR")
_BATCH_SCHEDULERS = ("OneCycleLR", "CyclicLR")


def _constructors(tree: ast.Module) -> dict[str, str]:
    """scheduler name -> torch scheduler class of its one assignment in the file."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = _text(node.targets[0])
            kind = _text(node.value.func).rsplit(".", 1)[-1] if isinstance(node.value, ast.Call) else ""
            found.setdefault(name, []).append(kind)
    return {name: kinds[0] for name, kinds in found.items() if len(kinds) == 1}


def _horizon_mentions_batches(tree: ast.Module, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _text(node.targets[0]) == name \
                and isinstance(node.value, ast.Call):
            return "len(" in _text(node.value)
    return False


def scheduler_moved_across_loops(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC303: an epoch-unit scheduler (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
    PolynomialLR built in this file) stepped once per epoch after the batch loop moved into the batch
    loop, right after the optimizer's step; or a per-batch scheduler (OneCycleLR, CyclicLR, or a horizon
    counted with ``len(loader)``) stepped in the batch loop moved out to the epoch loop."""
    if "sched" not in source.lower():
        return
    parents = _parents(tree)
    kinds = _constructors(tree)
    for epoch in ast.walk(tree):
        if not isinstance(epoch, (ast.For, ast.While)):
            continue
        for index, inner in enumerate(epoch.body):
            if not isinstance(inner, (ast.For, ast.While)) or not _trains(inner):
                continue
            rest = epoch.body[index + 1:]
            opt_steps = [s for s in _local_walk(inner) if isinstance(s, ast.stmt) and _statement_call(s, "step")
                         and _optimizer_steps(s) and _single_line(s)]
            # epoch-unit scheduler into the batch loop
            for later in rest:
                if not _scheduler_steps_in(later):
                    continue
                who = _receiver(later.value)
                if kinds.get(who) not in _EPOCH_SCHEDULERS or _horizon_mentions_batches(tree, who):
                    continue
                if len(opt_steps) != 1 or not _alone(source, later, tree):
                    continue
                step = opt_steps[0]
                if _innermost_loop(tree, step) is not inner:
                    continue
                moved = _insert(edit.without(source, later), step.end_lineno, step.end_col_offset,
                                f"; {_text(later.value)}")
                if moved:
                    yield Mutant("LC303", step.lineno, f"epoch scheduler {who} ({kinds[who]}) stepped per batch",
                                 moved)
            # per-batch scheduler out to the epoch loop
            for stmt in _scheduler_steps(inner):
                who = _receiver(stmt.value)
                if kinds.get(who) not in _BATCH_SCHEDULERS and not (kinds.get(who) and
                                                                     _horizon_mentions_batches(tree, who)):
                    continue
                if _innermost_loop(tree, stmt) is not inner or not _alone(source, stmt, tree):
                    continue
                target = next((s for s in rest if isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign))
                               and _single_line(s) and _alone(source, s, tree)), None)
                if target is None:
                    continue
                moved = _insert(edit.without(source, stmt), target.end_lineno, target.end_col_offset,
                                f"; {_text(stmt.value)}")
                if moved:
                    yield Mutant("LC303", target.lineno, f"per-batch scheduler {who} stepped per epoch", moved)


# ---------------------------------------------------------------- LC402


def _ema_update(stmt: ast.stmt) -> str | None:
    for method in ("update", "update_parameters", "step"):
        call = _statement_call(stmt, method)
        if call is not None and "ema" in _receiver(call).lower() and (method != "update" or call.args):
            return _receiver(call)
    return None


def ema_update_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC402: the file's only EMA update (``ema.update(model)``, ``ema.update_parameters(model)``,
    ``ema.step()``) removed, where it runs in a loop that back-propagates and steps, the EMA is built in
    this file and is read elsewhere (evaluated, saved)."""
    if "ema" not in source.lower():
        return
    updates = [(s, who) for s in ast.walk(tree) if (who := _ema_update(s))]
    if len(updates) != 1:
        return
    stmt, who = updates[0]
    loop = _innermost_loop(tree, stmt)
    if loop is None or not _trains(loop) or not _alone(source, stmt, tree):
        return
    built = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(_text(t) == who for t in n.targets)
             and isinstance(n.value, ast.Call)]
    if not built:
        return
    uses = source.count(who)
    if uses < 3:  # built, updated, and read at least once more
        return
    yield Mutant("LC402", stmt.lineno, f"{who} update removed", edit.without(source, stmt))


# ---------------------------------------------------------------- LC601 / LC604 / LC605


def item_dropped(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC601: ``total += loss.item()`` made ``total += loss``, where ``loss`` is back-propagated in the
    same loop (so it carries a graph) and ``total`` is not rebound in the loop (it sums across
    iterations)."""
    if ".item()" not in source:
        return
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        backs = {_text(b.func.value.args[0]) if isinstance(b.func.value, ast.Call) and b.func.value.args
                 else _text(b.func.value) for b in _method_calls(loop, "backward")}
        for node in _local_walk(loop):
            if not isinstance(node, ast.AugAssign) or not isinstance(node.op, ast.Add):
                continue
            if _innermost_loop(tree, node) is not loop or not isinstance(node.target, (ast.Name, ast.Attribute)):
                continue
            target = _text(node.target)
            rebound = [n for n in _local_walk(loop) if isinstance(n, (ast.Assign, ast.AnnAssign))
                       and any(_text(t) == target for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
            if rebound:
                continue
            items = [c for c in ast.walk(node.value) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr == "item" and not c.args and _text(c.func.value) in backs]
            if len(items) != 1:
                continue
            mutated = _replace_span(source, items[0], _text(items[0].func.value))
            if mutated:
                yield Mutant("LC601", node.lineno, f"{target} += {_text(items[0].func.value)} (no .item())", mutated)


def iterator_recreated(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC604: ``batch = next(it)`` in a training loop (not the refill in an ``except StopIteration``),
    ``it = iter(loader)`` made before that loop, made ``next(iter(loader))``: the loader restarts every
    step."""
    if "next(" not in source or "iter(" not in source:
        return
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            continue
        made: dict[str, list[ast.Assign]] = {}
        for node in _local_walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                made.setdefault(_text(node.targets[0]), []).append(node)
        for loop in _local_walk(func):
            if not isinstance(loop, (ast.For, ast.While)) or not _trains(loop):
                continue
            for call in _local_walk(loop):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "next"
                        and len(call.args) == 1):
                    continue
                if _in_handler(_parents(tree), call, loop):
                    continue  # the refill after StopIteration: the loop's own next() is the one that matters
                name = _text(call.args[0])
                assigns = made.get(name, [])
                sources = {_text(a.value.args[0]) for a in assigns if isinstance(a.value, ast.Call)
                           and _text(a.value.func) == "iter" and len(a.value.args) == 1}
                if len(sources) != 1 or not any(a.lineno < loop.lineno for a in assigns) or \
                        len(sources) != 1 or any(not (isinstance(a.value, ast.Call) and _text(a.value.func) == "iter")
                                                 for a in assigns):
                    continue
                loader = sources.pop()
                mutated = _replace_span(source, call, f"next(iter({loader}))")
                if mutated:
                    yield Mutant("LC604", call.lineno, f"next({name}) made next(iter({loader}))", mutated)


def _in_handler(parents: dict[ast.AST, ast.AST], node: ast.AST, loop: ast.AST) -> bool:
    while node in parents and node is not loop:
        node = parents[node]
        if isinstance(node, ast.ExceptHandler):
            return True
    return False


def _mode_calls(node: ast.AST, method: str) -> list[ast.Expr]:
    return [s for s in _local_walk(node) if (c := _statement_call(s, method)) is not None
            and not c.args and not c.keywords]


def train_mode_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC605: ``model.train()`` at the top of an epoch (first statements of the epoch loop's body, or of a
    training function of this file that the epoch loop calls) removed, where the epoch loop also puts
    ``model`` in eval mode (directly, or through a function of this file it calls that calls
    ``model.eval()`` / ``<param>.eval()``) and no other ``train()`` of it is in the file."""
    if ".eval()" not in source or ".train()" not in source:
        return
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def evals(node: ast.AST) -> bool:
        if _mode_calls(node, "eval"):
            return True
        for call in _local_walk(node):
            if isinstance(call, ast.Call):
                name = _text(call.func).rsplit(".", 1)[-1]
                if name in functions and _mode_calls(functions[name], "eval"):
                    return True
        return False

    for epoch in ast.walk(tree):
        if not isinstance(epoch, (ast.For, ast.While)) or not evals(epoch):
            continue
        candidates: list[tuple[ast.stmt, ast.AST]] = []
        for stmt in epoch.body[:3]:
            if _statement_call(stmt, "train") and not stmt.value.args:
                candidates.append((stmt, epoch))
        for call in _local_walk(epoch):
            if isinstance(call, ast.Call):
                name = _text(call.func).rsplit(".", 1)[-1]
                func = functions.get(name)
                if func is not None and not _mode_calls(func, "eval") and any(_trains(n) for n in _local_walk(func)
                                                                            if isinstance(n, (ast.For, ast.While))):
                    for stmt in func.body[:4]:
                        if _statement_call(stmt, "train") and not stmt.value.args:
                            candidates.append((stmt, func))
        seen: set[int] = set()
        for stmt, where in candidates:
            if stmt.lineno in seen:
                continue
            seen.add(stmt.lineno)
            who = _receiver(stmt.value)
            if where is epoch and not any(_trains(n) for n in _local_walk(epoch) if isinstance(n, (ast.For, ast.While))):
                continue
            if source.count(f"{who}.train(") != 1 or "train(True)" in source or "train(mode" in source:
                continue
            if not _alone(source, stmt, tree):
                continue
            yield Mutant("LC605", stmt.lineno, f"{who}.train() at the top of the epoch removed", edit.without(source, stmt))


OPERATORS = [zero_grad_removed, zero_grad_moved_after_backward, unscale_removed, scaler_update_removed,
             scaler_step_bypassed, scheduler_before_optimizer, scheduler_moved_across_loops, ema_update_removed,
             item_dropped, iterator_recreated, train_mode_removed]
