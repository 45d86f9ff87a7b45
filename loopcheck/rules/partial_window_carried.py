"""## What it does
Checks gradient-accumulation loops over a data loader whose step condition `(i + 1) % N == 0`
never fires for the last, partial window of an epoch.

## Why is this bad?
When the number of batches is not a multiple of N, the gradients of the last few batches of
every epoch are never stepped: they leak into the first step of the next epoch (a window of
more than N micro-batches) or are wiped by the next window's zeroing. The epoch's tail is
silently dropped or double-weighted.

## Fix
Also step on the last batch: `if (i + 1) % N == 0 or (i + 1) == len(loader):`. A negated test
narrows instead: `if (i + 1) % N != 0 and (i + 1) != len(loader): continue`. `--fix` extends every
test of the loop that means the window boundary (`update_grad=...`, the zeroing, a `no_sync()`
branch), so they keep pairing.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Edit, Fix
from loopcheck.model import FileModel, GuardKind, Kind, Phase, Style, TrainingLoop
from loopcheck.model.guards import Guard, enumerate_start
from loopcheck.model.syntax import children, func_name, positional, same, source
from loopcheck.model.training import is_data_loop
from loopcheck.rules._base import Rule, Violation


class PartialWindowCarried(Rule):
    code = "LC105"
    message = "the last, partial accumulation window of each epoch is never stepped"
    fixable = True

    VALID = [
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
""",
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    if len(loader) % accum != 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:  # LC105
            optimizer.step()
            optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            guard = training.step_guard
            if training.style is not Style.GUARDED or guard is None or guard.test is None:
                continue
            if guard.phase is not Phase.BOUNDARY or guard.flush is not None or not is_data_loop(training.loop):
                continue
            # the index must restart with the loop (enumerate's index), not run on across epochs
            target = training.loop.assignments[0] if training.loop.assignments else None
            if target is None or target.op != "for" or guard.index not in target.names:
                continue
            parent = training.loop.parent
            if parent is not None and any(s.order > training.loop.order for s in parent.events(Kind.STEP)):
                continue  # the leftover window is stepped after the loop
            step = training.steps[0]
            owner = next((c.owner for c in step.conds if c.test is guard.test), step.stmt)
            last = _last_batch_test(target.value, guard.index, enumerate_start(target, guard.index))
            fix = _also_last(training, guard, last) if last else None
            yield Violation(guard.test, owner, f"when the number of batches is not a multiple of the accumulation "
                                                "count, the last window of each epoch is never stepped: add "
                                                f"`or {last or '(i + 1) == len(loader)'}` to the step condition", fix)


def _also_last(training: TrainingLoop, guard: Guard, last: str) -> Fix | None:
    """Extend every test of the loop that means "this is the accumulation boundary" (the step's, and
    the copies that pair with it: ``update_grad=``, the zeroing, a ``no_sync`` branch), each with
    its polarity: ``boundary or last`` and ``not_boundary and not last``. Where another test on the
    same window reads differently, extending only some of them would pair the wrong iterations."""
    negated = last.replace(" == ", " != ")
    edits = []
    for test, parent in _tests(training.loop.node):
        atom = training.reader.atom(test, False, None, 0)
        if atom.kind not in (GuardKind.PERIODIC, GuardKind.NOT_PERIODIC) or atom.modulus is None:
            continue
        if not same(atom.modulus, guard.modulus) or atom.phase is Phase.START:
            continue
        if atom.index != guard.index or atom.phase is not Phase.BOUNDARY:
            return None
        text = f"{source(test)} or {last}" if atom.kind is GuardKind.PERIODIC else f"{source(test)} and {negated}"
        if isinstance(parent, (cst.BooleanOperation, cst.UnaryOperation)):
            text = f"({text})"
        edits.append(Edit(test, replacement=cst.parse_expression(text)))
    if not any(e.target is guard.test for e in edits):
        return None  # the step's test is not written in this loop (an alias, a helper)
    return Fix(f"also step when `{last}`", tuple(edits))


def _tests(loop: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
    """Expressions of ``loop``'s body used as truth values: comparisons anywhere, and bare
    ``(i + 1) % N`` as the test of an ``if``/``while``/conditional expression or a boolean operand."""
    out = []
    stack: list[cst.CSTNode] = [loop]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        for child in children(node):
            if isinstance(child, cst.Comparison) or isinstance(child, cst.BinaryOperation) and isinstance(
                    child.operator, cst.Modulo) and _truth_position(node, child):
                out.append((child, node))
                continue
            stack.append(child)
    return out


def _truth_position(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
        return parent.test is child
    return isinstance(parent, cst.BooleanOperation) or isinstance(parent, cst.UnaryOperation) and isinstance(
        parent.operator, cst.Not)


def _last_batch_test(iterable: cst.BaseExpression, index: str, start: int | None) -> str | None:
    """``(i + 1) == len(loader)`` for ``for i, batch in enumerate(loader)``."""
    if not isinstance(iterable, cst.Call) or func_name(iterable) != "enumerate" or start not in (0, 1):
        return None
    args = positional(iterable)
    loader = args[0] if args else None
    while isinstance(loader, cst.Call) and func_name(loader) in ("tqdm", "tqdm.tqdm") and positional(loader):
        loader = positional(loader)[0]
    if loader is None or isinstance(loader, cst.Call):
        return None
    return f"({index} + 1) == len({source(loader)})" if start == 0 else f"{index} == len({source(loader)})"
