"""Autofixes: edits of the parsed module by node identity, applied with one libcst transformer.

A rule attaches a ``Fix`` (a few ``Edit``s) to a finding when the model is certain enough; the
edits move, insert or replace whole statements or single expressions, so comments and formatting
everywhere else are kept byte for byte. The driver (``loopcheck.fixer``) applies independent fixes
together and checks the result with every rule.

A fix must be right on every path through the loop. The helpers below find where an event belongs
relative to the optimizer steps (after the last step of every branch that steps, before the first
one), and whether the same call is already there, in which case the event is dropped instead of
moved: a fix never adds a call that already runs on the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from loopcheck.model import Cond, Event, FileModel, Kind, Style, TrainingLoop
from loopcheck.model.syntax import children, source


@dataclass(frozen=True)
class Edit:
    """Remove ``target``, replace it with ``replacement`` (``None`` = keep it), and/or put
    statements before or after it in its block."""

    target: cst.CSTNode
    replacement: cst.CSTNode | None = None
    remove: bool = False
    before: tuple[cst.BaseStatement, ...] = ()
    after: tuple[cst.BaseStatement, ...] = ()


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...] = field(default_factory=tuple)
    safe: bool = True  # unsafe fixes may change behaviour beyond the finding: --unsafe-fixes


def move_after(stmt: cst.BaseStatement, anchor: cst.BaseStatement, message: str) -> Fix:
    return Fix(message, (Edit(stmt, remove=True), Edit(anchor, after=(stmt,))))


def move_before(stmt: cst.BaseStatement, anchor: cst.BaseStatement, message: str) -> Fix:
    return Fix(message, (Edit(stmt, remove=True), Edit(anchor, before=(stmt,))))


def insert_before(anchor: cst.BaseStatement, code: str, message: str) -> Fix:
    return Fix(message, (Edit(anchor, before=(cst.parse_statement(code),)),))


def insert_after(anchor: cst.BaseStatement, code: str, message: str) -> Fix:
    return Fix(message, (Edit(anchor, after=(cst.parse_statement(code),)),))


def replace(node: cst.CSTNode, code: str, message: str) -> Fix:
    new: cst.CSTNode = cst.parse_expression(code) if isinstance(node, cst.BaseExpression) else cst.parse_statement(code)
    return Fix(message, (Edit(node, replacement=new),))


def remove(stmt: cst.BaseStatement, message: str) -> Fix:
    return Fix(message, (Edit(stmt, remove=True),))


class Unapplied(Exception):
    """An edit's target is not where it can be edited (a one-line ``if x: y`` body)."""


def apply(module: cst.Module, fix: Fix) -> cst.Module:
    return apply_edits(module, fix.edits)


def apply_edits(module: cst.Module, edits: Sequence[Edit]) -> cst.Module:
    """``module`` with ``edits`` made; raises ``Unapplied`` when one of them could not be made (a
    statement edit whose target is not in an indented block, such as ``if x: y`` on one line).

    Only the nodes on the way from the module to an edited node are rebuilt (libcst's transformer
    would copy every node of the file, which dominates ``--fix`` on big files)."""
    parents = _parents(module)
    new: dict[int, cst.CSTNode] = {}
    blocks: dict[int, list[Edit]] = {}
    dirty: dict[int, cst.CSTNode] = {}
    for edit in edits:
        parent = parents.get(id(edit.target))
        if parent is None:
            raise Unapplied
        if edit.replacement is not None:
            new[id(edit.target)] = edit.replacement
        if edit.remove or edit.before or edit.after:
            if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
                raise Unapplied
            blocks.setdefault(id(parent), []).append(edit)
            dirty[id(parent)] = parent
        node: cst.CSTNode | None = parent if edit.replacement is not None else parents.get(id(parent))
        while node is not None:  # every ancestor is rebuilt around its new child
            dirty[id(node)] = node
            node = parents.get(id(node))
    depth = {key: _depth(node, parents) for key, node in dirty.items()}
    for key in sorted(dirty, key=lambda k: -depth[k]):
        node = dirty[key]
        rebuilt = _with_new_children(node, new)
        if key in blocks:
            rebuilt = _with_body_edits(node, rebuilt, blocks[key], new)  # type: ignore[arg-type]
        new[key] = rebuilt
    return new.get(id(module), module)  # type: ignore[return-value]


def _parents(module: cst.Module) -> dict[int, cst.CSTNode]:
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


def _depth(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> int:
    depth = 0
    while id(node) in parents:
        node = parents[id(node)]
        depth += 1
    return depth


def _with_new_children(node: cst.CSTNode, new: dict[int, cst.CSTNode]) -> cst.CSTNode:
    changes = {}
    for name in node.__dataclass_fields__:  # type: ignore[attr-defined]
        value = getattr(node, name)
        if isinstance(value, (list, tuple)):
            if any(id(item) in new for item in value):
                changes[name] = type(value)(new.get(id(item), item) for item in value)
        elif id(value) in new:
            changes[name] = new[id(value)]
    return node.with_changes(**changes) if changes else node


def _with_body_edits(original: cst.IndentedBlock | cst.Module, rebuilt: cst.IndentedBlock | cst.Module,
                     edits: list[Edit], new: dict[int, cst.CSTNode]) -> cst.CSTNode:
    by_target: dict[int, list[Edit]] = {}
    for edit in edits:
        by_target.setdefault(id(edit.target), []).append(edit)
    body: list[cst.CSTNode] = []
    for stmt in original.body:
        mine = by_target.get(id(stmt), [])
        body.extend(s for e in mine for s in e.before)
        if not any(e.remove for e in mine):
            body.append(new.get(id(stmt), stmt))
        body.extend(s for e in mine for s in e.after)
    if not body and isinstance(original, cst.IndentedBlock):
        body.append(cst.SimpleStatementLine([cst.Pass()]))
    return rebuilt.with_changes(body=body)


# -- where an event belongs relative to the optimizer steps ----------------------------------------


def own_line(event: Event) -> bool:
    """The event's statement is a line of its own (no ``a(); b()``): it can move or be anchored to."""
    return isinstance(event.stmt, cst.SimpleStatementLine) and len(event.stmt.body) == 1


def _single_statement(event: Event) -> bool:
    """A line holding nothing but the event (not ``x = opt.step()``)."""
    small = event.stmt.body[0] if own_line(event) else None  # type: ignore[attr-defined]
    return small is event.node or isinstance(small, cst.Expr) and small.value is event.node


class _Tree:
    """Parent links below one loop (or function) node, built on demand."""

    def __init__(self, top: cst.CSTNode) -> None:
        self.top = top
        self.parent: dict[int, cst.CSTNode] = {}
        stack = [top]
        while stack:
            node = stack.pop()
            for child in children(node):
                self.parent[id(child)] = node
                stack.append(child)

    def holds(self, node: cst.CSTNode) -> bool:
        return id(node) in self.parent

    def inside(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        """``node`` is ``ancestor`` or lies within it."""
        current: cst.CSTNode | None = node
        while current is not None:
            if current is ancestor:
                return True
            current = self.parent.get(id(current))
        return False

    def statements(self, node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.IndentedBlock]]:
        """(statement, block holding it) for every statement around ``node``, innermost first."""
        out = []
        current = node
        while current is not self.top:
            parent = self.parent.get(id(current))
            if parent is None:
                return []
            if isinstance(parent, cst.IndentedBlock):
                out.append((current, parent))
            current = parent
        return out


@dataclass(frozen=True)
class StepRegion:
    """The statements of one block that hold every optimizer step of a training loop."""

    block: cst.IndentedBlock
    holders: tuple[cst.BaseStatement, ...]  # in block order
    tree: _Tree

    @property
    def first(self) -> cst.BaseStatement:
        return self.holders[0]

    @property
    def last(self) -> cst.BaseStatement:
        return self.holders[-1]

    def holds(self, event: Event) -> bool:
        """``event`` is inside one of the statements that step."""
        return any(self.tree.inside(event.stmt, h) for h in self.holders)

    def covers(self, training: TrainingLoop, event: Event) -> bool:
        """``event`` runs in the block of the steps, on step iterations only (the same ones)."""
        home = training.loop if training.style is Style.GUARDED else training.loop.parent
        return event.loop is home and self.tree.holds(event.stmt) and self.tree.inside(event.stmt, self.block) \
            and _on_step_iterations(training, event.conds, event)

    def position(self, stmt: cst.CSTNode) -> int | None:
        """Index in the block of the statement that holds ``stmt`` (None: not in this block)."""
        for held, block in self.tree.statements(stmt) if stmt is not self.tree.top else []:
            if block is self.block:
                return list(self.block.body).index(held)
        return None


def _home(model: FileModel, training: TrainingLoop, event: Event) -> cst.CSTNode | None:
    """The node whose body ``event`` sits in directly, when the event runs once per iteration of its
    loop there: the loop body, or the body of a same-file helper the loop calls, called nowhere else."""
    loop = event.loop
    if loop is None or not _single_statement(event):
        return None
    home = model.owner(event.stmt)
    if home is loop.node and event.origin is loop.function:
        return home
    if event.origin is not None and home is event.origin and called_once(model, event.origin):
        return home
    return None


def called_once(model: FileModel, function: cst.FunctionDef) -> bool:
    """A helper defined once and called from one place: editing it changes one call site only."""
    name = function.name.value
    if len(model.index.functions.get(name, [])) != 1:
        return False
    calls = [c for c in model.index.calls if (isinstance(c.func, cst.Name) and c.func.value == name)
             or (isinstance(c.func, cst.Attribute) and c.func.attr.value == name)]
    return len(calls) == 1


def step_region(model: FileModel, training: TrainingLoop, event: Event) -> StepRegion | None:
    """Where ``event`` (a statement of its own, run on every micro-batch) can go so that it runs
    exactly when the optimizer steps, on every path.

    Every step of the loop must sit in one block, in the same function as the event; the statements
    of that block holding them must run only on step iterations (the accumulation boundary for a
    guarded loop, with the step condition read with its polarity: ``if (i + 1) % N != 0: continue``
    counts), or on every iteration of the outer loop for an inner micro-step loop."""
    home = _home(model, training, event)
    steps = _steps_of_every_variant(model, training, event)
    if home is None or not steps or any(s.origin is not event.origin or s.closure for s in steps):
        return None
    if training.style is Style.GUARDED:
        if event.loop is not training.loop:
            return None
        top = home
    elif training.style is Style.MICRO_LOOP:
        parent = training.loop.parent
        if event.loop is not training.loop or home is not training.loop.node or parent is None or not parent.is_loop:
            return None
        top = parent.node
    else:
        return None
    tree = _Tree(top)
    paths = [tree.statements(s.stmt) for s in steps]
    if not all(paths):
        return None
    # the innermost block holding every step
    blocks = [[block for _, block in path] for path in paths]
    common = [b for b in blocks[0] if all(any(b is other for other in path) for path in blocks[1:])]
    if not common:
        return None
    block = common[0]
    holders: list[cst.BaseStatement] = []
    for path, step in zip(paths, steps):
        held = next(stmt for stmt, b in path if b is block)
        if not any(held is h for h in holders):
            holders.append(held)  # type: ignore[arg-type]
        conds = tuple(c for c in step.conds if not tree.inside(c.owner, held))
        if not _on_step_iterations(training, conds, step):
            return None
    if training.style is Style.MICRO_LOOP and tree.inside(training.loop.node, holders[0]):
        return None
    if any(tree.inside(event.stmt, h) for h in holders):
        return None
    order = {id(s): i for i, s in enumerate(block.body)}
    holders.sort(key=lambda h: order[id(h)])
    return StepRegion(block, tuple(holders), tree)


def _steps_of_every_variant(model: FileModel, training: TrainingLoop, event: Event) -> list[Event]:
    """The steps of every variant of the loop that runs ``event``: a move must be right in each
    (with ``if use_amp: ...; scaler.step(opt)`` / ``else: ...; opt.step()`` and a shared
    ``scheduler.step()``, moving it into one branch would stop it in the other)."""
    steps = {id(s.node): s for s in training.steps}
    for other in model.variants(training):
        if other is not training and any(e.node is event.node for e in other.loop.events(deep=True)):
            if not other.steps:
                return []
            steps.update((id(s.node), s) for s in other.steps if id(s.node) not in steps)
    return list(steps.values())


def _on_step_iterations(training: TrainingLoop, conds: tuple[Cond, ...], step: Event) -> bool:
    if training.style is Style.GUARDED:
        return training.reader.guard(conds, step.order).periodic
    reader = training.parent_reader
    return reader is not None and reader.guard(conds, step.order).always


def step_anchor(model: FileModel, training: TrainingLoop, event: Event) -> cst.BaseStatement | None:
    """The statement after which ``event`` runs once per optimizer step, after every step."""
    region = step_region(model, training, event)
    return region.last if region is not None else None


def already_there(training: TrainingLoop, event: Event, region: StepRegion, exact: bool = False) -> list[Event]:
    """Other events of ``event``'s kind in the step region: the same receiver (``exact``: the same
    call, arguments included)."""
    found = {id(e): e for e in training.step_loop.events(event.kind, deep=True) + training.loop.events(event.kind)
             if e is not event and region.covers(training, e) and e.receiver == event.receiver}
    if exact:
        return [e for e in found.values() if source(e.node) == source(event.node)]
    return list(found.values())


def move_to_step(model: FileModel, training: TrainingLoop, event: Event, message: str,
                 exact: bool = False) -> Fix | None:
    """Move ``event`` right after the last step of every step branch, or drop it where the step
    region already makes the same call (``exact``: with the same arguments, else no fix)."""
    region = step_region(model, training, event)
    if region is None:
        return None
    same = already_there(training, event, region)
    if same:
        if exact and not already_there(training, event, region, exact=True):
            return None
        return remove(event.stmt, f"remove the per-micro-batch `{source(event.node)}`: the step branch "  # type: ignore[arg-type]
                                  "already makes this call")
    return move_after(event.stmt, region.last, message)  # type: ignore[arg-type]


def move_before_steps(model: FileModel, training: TrainingLoop, event: Event, message: str,
                      also: tuple[Kind, ...] = ()) -> Fix | None:
    """Move ``event`` right before the first statement of the step region that steps (or makes one
    of the ``also`` calls), or drop it where the region already makes the same call."""
    region = step_region(model, training, event)
    if region is None:
        return None
    same = already_there(training, event, region)
    if same:
        if not already_there(training, event, region, exact=True):
            return None
        return remove(event.stmt, f"remove the per-micro-batch `{source(event.node)}`: the step branch "  # type: ignore[arg-type]
                                  "already makes this call")
    anchor_at = region.position(region.first)
    for other in training.step_loop.events(*also, deep=True) if also else []:
        at = region.position(other.stmt)
        if at is not None and anchor_at is not None and at < anchor_at:
            anchor_at = at
    if anchor_at is None:
        return None
    return move_before(event.stmt, region.block.body[anchor_at], message)  # type: ignore[arg-type]
