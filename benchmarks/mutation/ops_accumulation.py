"""Mutation operators of the gradient-accumulation / DDP family (LC101, LC102, LC105, LC106, LC107,
LC301, LC401, LC501, LC502).

Every operator injects only into a loop that really accumulates N > 1 micro-batches per optimizer
step, in one of three forms found in real code:

* periodic: a batch loop that back-propagates every iteration and steps the optimizer under a test
  of the loop's own counter modulo N (``if (i + 1) % N == 0:``, also through a flag assigned from
  such a test), N not a literal 0 or 1;
* micro-step: an inner ``for _ in range(N):`` that back-propagates and never steps, followed in the
  outer loop by the step (nanoGPT);
* Accelerate: the batch's work under ``with accelerator.accumulate(model):`` in a file that sets
  ``gradient_accumulation_steps``, with its boundary block ``if accelerator.sync_gradients:``.

What the step block holds (the zeroing, the clip, the scheduler, the EMA update) is moved to every
micro-batch; what the window needs (the ``/ N``, the last-batch term, the sync switch) is removed or
broken. Edits keep the line count (see ``edit``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from benchmarks.mutation import edit
from benchmarks.mutation.run import Mutant

Loop = ast.For | ast.While


# --- reading ----------------------------------------------------------------------------------------

def _flat(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` at its own level, also inside ``with`` and ``try`` blocks (which run
    every time the body does)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            out += _flat(stmt.body)
        elif isinstance(stmt, ast.Try):
            out += _flat(stmt.body)
    return out


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def _call_attr(stmt: ast.stmt) -> tuple[ast.Call, str] | None:
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        return value, value.func.attr
    return None


def _is_backward(stmt: ast.stmt) -> bool:
    found = _call_attr(stmt)
    return isinstance(stmt, ast.Expr) and found is not None and found[1] == "backward"


def _schedulerish(text: str) -> bool:
    low = text.lower()
    return "sched" in low or low.split(".")[-1].startswith("lr")


def _optimizer_step(call: ast.Call) -> bool:
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "step"):
        return False
    receiver = _text(call.func.value).lower()
    if "scaler" in receiver:
        return bool(call.args)
    return "opt" in receiver and not _schedulerish(receiver)


def _steps(nodes: Iterable[ast.AST]) -> bool:
    return any(isinstance(n, ast.Call) and _optimizer_step(n) for node in nodes for n in ast.walk(node))


def _zero_grads(nodes: Iterable[ast.AST]) -> list[ast.Expr]:
    return [n for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Expr) and (c := _call_attr(n)) and c[1] == "zero_grad"]


def _int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _loop_names(loop: Loop) -> set[str]:
    """The loop's own counters: its target and what its body assigns."""
    names: set[str] = set()
    if isinstance(loop, ast.For):
        names |= {_text(n) for n in ast.walk(loop.target) if isinstance(n, (ast.Name, ast.Attribute))}
    for node in ast.walk(loop):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        names |= {_text(t) for t in targets if isinstance(t, (ast.Name, ast.Attribute))}
    return names


def _counter_mod(expr: ast.AST, loop: Loop) -> ast.BinOp | None:
    """A ``counter % N`` in ``expr`` of one of the loop's own counters, N not a literal 0 or 1."""
    counters = _loop_names(loop)
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and \
                not isinstance(node.left, (ast.Constant, ast.JoinedStr)):
            n = _int(node.right)
            if n is not None and n <= 1:
                continue
            used = {_text(x) for x in ast.walk(node.left) if isinstance(x, (ast.Name, ast.Attribute))}
            if used & counters:
                return node
    return None


@dataclass
class Window:
    kind: str  # "periodic", "micro" or "accelerate"
    loop: Loop  # the loop over micro-batches
    backward: ast.Expr
    block: list[ast.stmt]  # the statements that run once per window (the step block)
    test: ast.If | None = None  # periodic / accelerate: the boundary `if`
    condition: ast.expr | None = None  # periodic: the expression holding `counter % N`
    mod: ast.BinOp | None = None
    count: ast.expr | None = None  # N
    outer: Loop | None = None  # micro: the loop around the micro-step loop
    micro: list[ast.stmt] = field(default_factory=list)  # the statements of every micro-batch
    accumulate: ast.With | None = None  # Accelerate: `with accelerator.accumulate(model):`


def _assigned(flat: list[ast.stmt], name: str, before: int) -> ast.expr | None:
    found = None
    for stmt in flat:
        if isinstance(stmt, ast.Assign) and stmt.lineno < before and len(stmt.targets) == 1 and \
                _text(stmt.targets[0]) == name:
            found = stmt.value
    return found


def _periodic(loop: Loop) -> Iterator[Window]:
    flat = _flat(loop.body)
    backwards = [s for s in flat if _is_backward(s)]
    if not backwards or _steps(b for b in backwards):
        return
    for stmt in flat:
        if not isinstance(stmt, ast.If) or not _steps(stmt.body) or _steps(stmt.orelse):
            continue
        before = [b for b in backwards if (b.end_lineno or b.lineno) < stmt.lineno]
        if not before:
            continue
        condition: ast.expr = stmt.test
        mod = _counter_mod(condition, loop)
        count = mod.right if mod is not None else _threshold(stmt)
        if mod is None and count is None:  # `if boundary:` with `boundary = (i + 1) % N == 0` above
            names = [n for n in ast.walk(stmt.test) if isinstance(n, (ast.Name, ast.Attribute))]
            for name in names:
                value = _assigned(flat, _text(name), stmt.lineno)
                if value is not None and (mod := _counter_mod(value, loop)) is not None:
                    condition, count = value, mod.right
                    break
        if count is None:
            continue
        if any(_steps([s]) for s in flat if s is not stmt and not _inside(s, stmt) and not _inside(stmt, s)):
            continue  # another step every iteration: no window
        yield Window("periodic", loop, before[-1], stmt.body, stmt, condition, mod, count)


def _threshold(block: ast.If) -> ast.expr | None:
    """N of ``if k >= N:`` / ``if k == N:`` whose body resets ``k = 0``, or of yolov5's
    ``if ni - last_opt_step >= N:`` whose body sets ``last_opt_step``."""
    test = block.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.GtE, ast.Eq))):
        return None
    n = _int(test.comparators[0])
    if n is not None and n <= 1:
        return None
    left = test.left
    reset = left.right if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub) else left
    if not isinstance(reset, (ast.Name, ast.Attribute)):
        return None
    for stmt in _flat(block.body):
        if isinstance(stmt, ast.Assign) and any(_text(t) == _text(reset) for t in stmt.targets):
            if reset is left and _int(stmt.value) != 0:
                return None
            return test.comparators[0]
    return None


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    return inner is not outer and any(n is inner for n in ast.walk(outer))


def _micro(outer: Loop) -> Iterator[Window]:
    flat = _flat(outer.body)
    for position, stmt in enumerate(flat):
        if not isinstance(stmt, ast.For) or stmt.orelse:
            continue
        it = stmt.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and len(it.args) == 1 and not it.keywords):
            continue
        n = _int(it.args[0])
        if n is not None and n <= 1:
            continue
        inner = _flat(stmt.body)
        backwards = [s for s in inner if _is_backward(s)]
        if not backwards or _steps(stmt.body):
            continue
        after = [s for s in flat[position + 1:] if not _inside(s, stmt)]
        if not _steps(after):
            continue
        yield Window("micro", stmt, backwards[-1], after, count=it.args[0], outer=outer, micro=inner)


def _accelerate(source: str, loop: Loop) -> Iterator[Window]:
    if "gradient_accumulation_steps" not in source:
        return
    for stmt in _flat(loop.body):
        if not isinstance(stmt, ast.With) or len(stmt.items) != 1:
            continue
        ctx = stmt.items[0].context_expr
        if not (isinstance(ctx, ast.Call) and isinstance(ctx.func, ast.Attribute) and ctx.func.attr == "accumulate"
                and "accelerator" in _text(ctx.func.value).lower() and ctx.args):
            continue
        inner = _flat(stmt.body)
        backwards = [s for s in inner if _is_backward(s)]
        if not backwards:
            continue
        for block in _flat(loop.body):
            if isinstance(block, ast.If) and isinstance(block.test, ast.Attribute) and \
                    block.test.attr == "sync_gradients" and not block.orelse and block.lineno > backwards[-1].lineno:
                yield Window("accelerate", loop, backwards[-1], block.body, block, micro=inner, accumulate=stmt)


def _one_as_shipped(tree: ast.Module, count: ast.expr) -> bool:
    """N is a name (``grad_acc_steps``, ``args.grad_acc_steps``) that the file binds only to ``1``
    (``grad_acc_steps: int = 1``, a config dataclass's field) and sets nowhere else: no keyword of
    that name (``TrainArgs(grad_acc_steps=4)``), no dict key, no command-line flag. Such a loop
    accumulates nothing as the file ships it, so a pitfall injected into its window is inert."""
    name = count.id if isinstance(count, ast.Name) else count.attr if isinstance(count, ast.Attribute) else None
    if name is None:
        return False
    values = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name or isinstance(t, ast.Attribute) and t.attr == name
                   for t in targets):
                values.append(node.value)
        elif isinstance(node, ast.keyword) and node.arg == name:
            return False
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.lstrip("-").replace("-", "_") == name:
            return False  # a dict key, a flag (`--grad-acc-steps`), a `getattr(cfg, "...")`
    return bool(values) and all(v is not None and _int(v) == 1 for v in values)


def windows(source: str, tree: ast.Module) -> list[Window]:
    found: list[Window] = []
    for loop in ast.walk(tree):
        if isinstance(loop, (ast.For, ast.While)):
            found += list(_periodic(loop)) + list(_micro(loop)) + list(_accelerate(source, loop))
    return [w for w in found if w.kind != "periodic" or w.count is None or not _one_as_shipped(tree, w.count)]


# --- editing ----------------------------------------------------------------------------------------

def _col(source: str, line: int, byte_col: int) -> int:
    return len(edit.lines_of(source)[line - 1].encode()[:byte_col].decode(errors="ignore"))


def _replace_node(source: str, node: ast.AST, text: str) -> str:
    """``source`` with expression ``node`` replaced by one-line ``text``."""
    lines = edit.lines_of(source)
    first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
    start = _col(source, first, node.col_offset)  # type: ignore[attr-defined]
    end = _col(source, last, node.end_col_offset)  # type: ignore[attr-defined]
    new = lines[first - 1][:start] + text + lines[last - 1][end:]
    return edit.replaced(source, first, last, [new.rstrip("\n")])


def _single(source: str, stmt: ast.stmt, tree: ast.Module) -> bool:
    return stmt.lineno == stmt.end_lineno and edit.alone_on_its_lines(source, stmt, tree)


def _after(source: str, stmt: ast.stmt, text: str) -> str:
    """``text`` run right after the one-line statement ``stmt``, on its line."""
    lines = edit.lines_of(source)
    line = lines[stmt.lineno - 1]
    end = _col(source, stmt.lineno, stmt.end_col_offset)  # type: ignore[arg-type]
    return edit.replaced(source, stmt.lineno, stmt.lineno, [(line[:end] + "; " + text + line[end:]).rstrip("\n")])


def _before(source: str, stmt: ast.stmt, text: str) -> str:
    lines = edit.lines_of(source)
    line = lines[stmt.lineno - 1]
    start = _col(source, stmt.lineno, stmt.col_offset)
    return edit.replaced(source, stmt.lineno, stmt.lineno, [(line[:start] + text + "; " + line[start:]).rstrip("\n")])


def _move_out_of(source: str, block: ast.If, stmt: ast.stmt, tree: ast.Module) -> tuple[str, int] | None:
    """``stmt`` (a statement of ``block``'s body, alone on its lines) moved to run right after
    ``block``, every time: the lines of the body below it shift up and it takes the body's last
    lines, dedented to the ``if``. Returns the new source and ``stmt``'s new first line."""
    if block.orelse or stmt not in block.body or len(block.body) < 2 or block.lineno == block.body[0].lineno \
            or not edit.alone_on_its_lines(source, stmt, tree):
        return None
    lines = edit.lines_of(source)
    first, end, last = stmt.lineno, stmt.end_lineno or stmt.lineno, block.end_lineno or block.lineno
    inner, outer = edit.indent_of(source, first), edit.indent_of(source, block.lineno)
    moved = []
    for line in lines[first - 1:end]:
        if line.strip() and not line.startswith(inner):
            return None
        moved.append(outer + line[len(inner):] if line.strip() else line)
    body = lines[end:last] + moved
    return edit.replaced(source, first, last, [line.rstrip("\n") for line in body]), last - (end - first)


def _ends_line(source: str, stmt: ast.stmt) -> bool:
    """Nothing but a comment follows the one-line statement on its line."""
    line = edit.lines_of(source)[stmt.lineno - 1]
    rest = line[_col(source, stmt.lineno, stmt.end_col_offset):].strip()  # type: ignore[arg-type]
    return stmt.lineno == stmt.end_lineno and (not rest or rest.startswith("#"))


# --- operators ---------------------------------------------------------------------------------------

def zero_grad_every_micro_batch(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC101: the step block's (or window start's) ``zero_grad`` moved before every micro-batch's
    backward. Only where no zeroing runs every micro-batch already."""
    for w in windows(source, tree):
        if w.kind == "accelerate":
            continue
        every = w.micro if w.kind == "micro" else _flat(w.loop.body)
        if _zero_grads(s for s in every if isinstance(s, ast.Expr)):
            continue
        zeroing = _zero_grads(w.block) or _zero_grads(s for s in _flat(w.loop.body) if isinstance(s, ast.If))
        if not zeroing:
            continue
        z = zeroing[0]
        text = _text(z.value)
        mutated = edit.without(source, z) if _single(source, z, tree) else source
        mutated = _before(mutated, w.backward, text)
        yield Mutant("LC101", w.backward.lineno, f"{text} moved before every micro-batch's backward", mutated)


def zero_grad_unprepared(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC101 (Accelerate): the prepared optimizer's gated ``optimizer.zero_grad()`` inside
    ``accelerator.accumulate(model)`` made ``model.zero_grad()``, which Accelerate does not gate."""
    seen: set[int] = set()
    for w in windows(source, tree):
        if w.kind != "accelerate":
            continue
        accumulate = w.accumulate
        assert accumulate is not None
        ctx = accumulate.items[0].context_expr
        if isinstance(ctx.args[0], ast.Starred) or accumulate.lineno in seen:  # type: ignore[attr-defined]
            continue
        seen.add(accumulate.lineno)
        model = _text(ctx.args[0])  # type: ignore[attr-defined]
        for z in _zero_grads(accumulate.body):
            call = z.value
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            if "opt" not in _text(call.func.value).lower() or z.lineno < w.backward.lineno:
                continue
            yield Mutant("LC101", z.lineno, f"{_text(call)} made {model}.zero_grad()",
                         _replace_node(source, call.func.value, model))
            break


_SCALE_FREE = re.compile(r"\b(Adam|AdamW|Adamax|NAdam|FusedAdam|Lion)\s*\(")


def _loss_of(backward: ast.Expr) -> ast.expr | None:
    call = backward.value
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    receiver = call.func.value
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and \
            receiver.func.attr == "scale" and receiver.args:
        return receiver.args[0]
    if call.args and "backward" == call.func.attr and not isinstance(receiver, ast.Call):
        if "accelerator" in _text(receiver).lower() or "fabric" in _text(receiver).lower():
            return None  # divides by itself
    return receiver if not call.args else None


def loss_not_divided(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC102: the division of the back-propagated loss by the window's N removed (the N of the step
    test, or the micro-step loop's ``range(N)``). Not in files that build an Adam-like optimizer and
    clip nothing (their step does not change with the gradient's scale)."""
    if _SCALE_FREE.search(source) and "clip_grad" not in source:
        return
    for w in windows(source, tree):
        if w.kind == "accelerate" or w.count is None:
            continue
        n = _text(w.count)
        loss = _loss_of(w.backward)
        if loss is None:
            continue

        def divided(expr: ast.AST) -> ast.BinOp | None:
            return next((d for d in ast.walk(expr) if isinstance(d, ast.BinOp) and isinstance(d.op, ast.Div)
                         and _text(d.right) == n), None)

        if (d := divided(loss)) is not None:
            yield Mutant("LC102", w.backward.lineno, f"/ {n} removed from the backward",
                         _replace_node(source, d, _text(d.left)))
            continue
        if not isinstance(loss, ast.Name):
            continue
        every = w.micro if w.kind == "micro" else _flat(w.loop.body)
        for stmt in reversed([s for s in every if s.lineno < w.backward.lineno]):
            if isinstance(stmt, ast.AugAssign) and _text(stmt.target) == loss.id:
                if isinstance(stmt.op, ast.Div) and _text(stmt.value) == n:
                    yield Mutant("LC102", stmt.lineno, f"{loss.id} /= {n} removed", edit.without(source, stmt))
                break
            if isinstance(stmt, ast.Assign) and any(_text(t) == loss.id for t in stmt.targets):
                if len(stmt.targets) == 1 and (d := divided(stmt.value)) is not None and d is stmt.value:
                    if isinstance(d.left, ast.Name) and d.left.id == loss.id:
                        yield Mutant("LC102", stmt.lineno, f"{loss.id} = {loss.id} / {n} removed",
                                     edit.without(source, stmt))
                    else:
                        yield Mutant("LC102", stmt.lineno, f"/ {n} removed from {loss.id}'s assignment",
                                     _replace_node(source, d, _text(d.left)))
                break


_LAST = re.compile(r"len\(|last|num|total|max|steps|size|batches|end", re.I)


def last_window_term_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC105: ``(i + 1) % N == 0 or <last batch>`` made ``(i + 1) % N == 0``: the last, partial window
    of an epoch is no longer stepped."""
    for w in windows(source, tree):
        cond = w.condition
        if w.kind != "periodic" or not isinstance(cond, ast.BoolOp) or not isinstance(cond.op, ast.Or):
            continue
        periodic = [v for v in cond.values if w.mod is not None and _inside(w.mod, v) or v is w.mod]
        others = [v for v in cond.values if v not in periodic]
        if len(periodic) != 1 or not others or not all(_LAST.search(_text(v)) for v in others):
            continue
        if any(isinstance(v, ast.BoolOp) for v in others):
            continue
        yield Mutant("LC105", w.test.lineno, f"'or {' or '.join(map(_text, others))}' removed",  # type: ignore[union-attr]
                     _replace_node(source, cond, _text(periodic[0])))


def _zero_based_index(loop: Loop) -> str | None:
    if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call) or not isinstance(loop.iter.func, ast.Name):
        return None
    call = loop.iter
    if call.func.id == "enumerate" and len(call.args) == 1 and isinstance(loop.target, ast.Tuple) and \
            isinstance(loop.target.elts[0], ast.Name):  # type: ignore[attr-defined]
        start = [k.value for k in call.keywords if k.arg == "start"]
        if not start or _int(start[0]) == 0:
            return loop.target.elts[0].id
    if call.func.id == "range" and len(call.args) == 1 and isinstance(loop.target, ast.Name):  # type: ignore[attr-defined]
        return loop.target.id
    return None


def boundary_off_by_one(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC106: ``(i + 1) % N`` of a 0-based loop index made ``i % N``: the first step comes after one
    micro-batch, every later window still has N (no reassignment of ``i`` in the loop)."""
    for w in windows(source, tree):
        if w.kind != "periodic" or w.mod is None:
            continue
        index = _zero_based_index(w.loop)
        left = w.mod.left
        if index is None or not (isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add)
                                 and isinstance(left.left, ast.Name) and left.left.id == index and _int(left.right) == 1):
            continue
        assigned = {_text(t) for n in ast.walk(w.loop) if isinstance(n, (ast.Assign, ast.AugAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
        if index in assigned:
            continue
        yield Mutant("LC106", left.lineno, f"({index} + 1) % N made {index} % N", _replace_node(source, left, index))


_CLIPS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}


def _clip(stmt: ast.stmt) -> bool:
    found = _call_attr(stmt)
    return found is not None and found[1] in _CLIPS


def clip_every_micro_batch(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC107: the step block's ``clip_grad_norm_`` moved right after every micro-batch's backward.
    Not where the step block unscales a GradScaler first (that would be LC201's pitfall too)."""
    for w in windows(source, tree):
        if not _ends_line(source, w.backward) or any(
                isinstance(n, ast.Attribute) and n.attr == "unscale_" for s in w.block for n in ast.walk(s)):
            continue
        for stmt in _flat(w.block):
            if _clip(stmt) and _single(source, stmt, tree):
                if w.kind == "accelerate" and "accelerator" not in _text(stmt).lower():
                    continue
                mutated = _after(edit.without(source, stmt), w.backward, _text(stmt))
                yield Mutant("LC107", w.backward.lineno, f"{_text(stmt)[:60]} moved after every backward", mutated)
                break


def _scheduler_step(stmt: ast.stmt) -> bool:
    found = _call_attr(stmt)
    return isinstance(stmt, ast.Expr) and found is not None and found[1] == "step" and not found[0].args and \
        not found[0].keywords and isinstance(found[0].func, ast.Attribute) and _schedulerish(_text(found[0].func.value))


def _moved_every_micro_batch(source: str, tree: ast.Module, w: Window, stmt: ast.stmt) -> tuple[str, int] | None:
    if w.kind == "micro":
        if not _single(source, stmt, tree) or not _ends_line(source, w.backward):
            return None
        return _after(edit.without(source, stmt), w.backward, _text(stmt)), w.backward.lineno
    assert w.test is not None
    return _move_out_of(source, w.test, stmt, tree)


def _values(tree: ast.Module, target: str) -> list[ast.expr]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and any(_text(t) == target for t in n.targets)]


def _bounds(tree: ast.Module, w: Window) -> set[str]:
    """The bound ``H`` of a ``while counter < H:`` around the window whose counter counts optimizer
    steps (incremented in the step block, or once per outer iteration around a micro-step loop)."""
    bounds = set()
    holders = [w.outer] if w.kind == "micro" else edit.enclosing_loops(tree, w.loop) + [w.loop]
    counted = w.block if w.kind == "periodic" else (w.outer.body if w.outer is not None else [])
    steps = {_text(n.target) for s in counted for n in ast.walk(s)
             if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add)}
    if w.kind == "micro":
        steps = {_text(n.target) for s in counted if not _inside(s, w.loop) for n in ast.walk(s)
                 if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and not _inside(n, w.loop)}
    for loop in holders:
        test = loop.test if isinstance(loop, ast.While) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE)) \
                and _text(test.left) in steps:
            bounds.add(_text(test.comparators[0]))
    return bounds


def _horizon_in_steps(tree: ast.Module, scheduler: str, w: Window) -> bool:
    """The scheduler is built in the file with a horizon visibly counted in optimizer steps: divided
    by the accumulation count (``len(loader) // args.gradient_accumulation_steps * epochs``, also
    through assigned names, not through a call such as the loader's ``batch_size=b // accum``), or
    the bound of a loop that counts optimizer steps. A horizon in micro-batches makes a
    per-micro-batch scheduler right, an unread one may."""
    built = [v for v in _values(tree, scheduler) if isinstance(v, ast.Call)]
    if len(built) != 1:
        return False
    count = _text(w.count) if w.count is not None else None
    bounds = _bounds(tree, w)
    seen: set[str] = set()
    todo: list[ast.AST] = [a for a in built[0].args[1:]] + [k.value for k in built[0].keywords]
    while todo:
        expr = todo.pop()
        for node in ast.walk(expr):
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
                divisor = _text(node.right)
                if "accum" in divisor.lower() or divisor == count:
                    return True
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = _text(node)
                if name in bounds:
                    return True
                if name not in seen:
                    seen.add(name)
                    todo += [v for v in _values(tree, name) if not isinstance(v, ast.Call)]
    return False


def scheduler_every_micro_batch(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC301: a per-step scheduler's ``step()`` in the step block moved out of it (periodic: right
    after the boundary ``if``; micro-step: after every micro-batch's backward). Only a scheduler built
    in the file with a horizon counted in optimizer steps; not under Accelerate (its prepared
    scheduler gates itself)."""
    for w in windows(source, tree):
        if w.kind == "accelerate":
            continue
        for stmt in (w.test.body if w.test is not None else w.block):
            if _scheduler_step(stmt):
                receiver = stmt.value.func.value  # type: ignore[attr-defined]
                if not _horizon_in_steps(tree, _text(receiver), w):
                    break
                moved = _moved_every_micro_batch(source, tree, w, stmt)
                if moved:
                    yield Mutant("LC301", moved[1], f"{_text(stmt)} moved to every micro-batch", moved[0])
                break


def _ema_update(stmt: ast.stmt) -> bool:
    found = _call_attr(stmt)
    if not isinstance(stmt, ast.Expr) or found is None or not isinstance(found[0].func, ast.Attribute):
        return False
    receiver = _text(found[0].func.value).lower()
    return found[1] == "update_parameters" or found[1] in {"update", "step"} and "ema" in receiver.split(".")[-1]


def _ema_update_block(stmt: ast.stmt) -> bool:
    """An EMA update, or ``if ema: ema.update(model)`` (its body only that)."""
    if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1:
        return _ema_update(stmt.body[0])
    return _ema_update(stmt)


def ema_every_micro_batch(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC401: a weight EMA update (``ema.update(model)``, ``AveragedModel.update_parameters``, also
    under ``if ema:``) in the step block moved out of it, to every micro-batch."""
    for w in windows(source, tree):
        for stmt in (w.test.body if w.test is not None else w.block):
            if _ema_update_block(stmt):
                moved = _moved_every_micro_batch(source, tree, w, stmt)
                if moved:
                    yield Mutant("LC401", moved[1], f"{_text(stmt)[:60]} moved to every micro-batch", moved[0])
                break


_NOT_DDP = re.compile(r"FullyShardedDataParallel|\bFSDP\b|deepspeed", re.I)


def _sync_with(node: ast.AST) -> bool:
    return isinstance(node, ast.With) and len(node.items) == 1 and any(
        isinstance(n, ast.Attribute) and n.attr in {"no_sync", "no_backward_sync"}
        for n in ast.walk(node.items[0].context_expr))


def _backpropagates(tree: ast.AST, loop: Loop) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
               for n in ast.walk(loop))


def no_sync_removed(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC501: ``with model.no_sync():`` (also ``no_sync() if ... else nullcontext()``, Accelerate's
    ``no_sync(model)``, Fabric's ``no_backward_sync``) made ``if True:``, and nanoGPT's
    ``model.require_backward_grad_sync = ...`` removed, in a batch loop that back-propagates (the
    switch exists only for a DDP model that accumulates). Not in FSDP/DeepSpeed files."""
    if _NOT_DDP.search(source):
        return
    for node in ast.walk(tree):
        loops = [n for n in edit.enclosing_loops(tree, node)] if _sync_with(node) or _sync_flag(node) else []
        if not loops or not _backpropagates(tree, loops[-1]):
            continue
        if isinstance(node, ast.With):
            header = node.items[0].context_expr
            lines = edit.lines_of(source)
            if header.end_lineno != node.lineno or not re.match(r"\s*with\b", lines[node.lineno - 1]) or \
                    node.body[0].lineno == node.lineno:
                continue
            new = edit.indent_of(source, node.lineno) + "if True:"
            yield Mutant("LC501", node.lineno, f"{_text(header)[:50]} made if True", edit.replaced(
                source, node.lineno, node.lineno, [new]))
        elif edit.alone_on_its_lines(source, node, tree):  # type: ignore[arg-type]
            yield Mutant("LC501", node.lineno, "require_backward_grad_sync assignment removed",
                         edit.without(source, node))  # type: ignore[arg-type]


def _sync_flag(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
        and node.targets[0].attr == "require_backward_grad_sync" and not isinstance(node.value, ast.Constant)


def sync_inverted(source: str, tree: ast.Module) -> Iterator[Mutant]:
    """LC502: the test choosing which micro-batches sync negated (``require_backward_grad_sync =
    not (...)``, ``no_sync() if not (...) else nullcontext()``): the last micro-batch of each window
    runs un-synced and the ranks step on their own gradients."""
    if _NOT_DDP.search(source):
        return
    for node in ast.walk(tree):
        if _sync_flag(node):
            value = node.value  # type: ignore[attr-defined]
        elif _sync_with(node) and isinstance(node.items[0].context_expr, ast.IfExp):  # type: ignore[attr-defined]
            value = node.items[0].context_expr.test  # type: ignore[attr-defined]
        else:
            continue
        loops = edit.enclosing_loops(tree, node)
        if not loops or not _backpropagates(tree, loops[-1]):
            continue
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
            new = _text(value.operand)
        else:
            new = f"not ({_text(value)})"
        yield Mutant("LC502", node.lineno, f"sync test negated: {new[:50]}", _replace_node(source, value, new))


OPERATORS = [zero_grad_every_micro_batch, zero_grad_unprepared, loss_not_divided, last_window_term_removed,
             boundary_off_by_one, clip_every_micro_batch, scheduler_every_micro_batch, ema_every_micro_batch,
             no_sync_removed, sync_inverted]
