"""Autofixes: edits of the parsed module by node identity, applied with one libcst transformer.

A rule attaches a ``Fix`` (a few ``Edit``s) to a finding when the model is certain enough; the
edits move, insert or replace whole statements or single expressions, so comments and formatting
everywhere else are kept byte for byte. ``fix_source`` applies one fix at a time and checks the
file again until nothing fixable is left: fixes never have to be composed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from loopcheck.model import Event, FileModel, Style, TrainingLoop


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


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Sequence[Edit]) -> None:
        super().__init__()
        self.by_target: dict[int, list[Edit]] = {}
        for edit in edits:
            self.by_target.setdefault(id(edit.target), []).append(edit)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        for edit in self.by_target.get(id(original_node), []):
            if edit.replacement is not None:
                updated_node = edit.replacement
        updated = super().on_leave(original_node, updated_node)
        body = getattr(updated, "body", None)
        if isinstance(updated, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)):
            originals = original_node.body  # type: ignore[attr-defined]
            return updated.with_changes(body=self._rebuild(originals, body, isinstance(updated, cst.Module)))
        return updated  # type: ignore[return-value]

    def _rebuild(self, originals: Sequence[cst.CSTNode], updated: Sequence[cst.CSTNode],
                 is_module: bool) -> list[cst.CSTNode]:
        out: list[cst.CSTNode] = []
        for original, new in zip(originals, updated):
            edits = self.by_target.get(id(original), [])
            out.extend(s for e in edits for s in e.before)
            if not any(e.remove for e in edits):
                out.append(new)
            out.extend(s for e in edits for s in e.after)
        if not out and not is_module:
            out.append(cst.SimpleStatementLine([cst.Pass()]))
        return out


def apply(module: cst.Module, fix: Fix) -> cst.Module:
    return module.visit(_Apply(fix.edits))


def step_anchor(model: FileModel, training: TrainingLoop, event: Event) -> cst.BaseStatement | None:
    """The statement of the optimizer step that ``event`` should sit next to, when moving it there
    is a plain statement move: ``event`` is a one-call statement directly in its loop's body, and
    the step is a one-call statement in the step branch (``if (i + 1) % N == 0:``) or, for an inner
    micro-step loop, directly in the loop around it; both in the same function."""
    if not _single_statement(event) or model.owner(event.stmt) is not event.loop.node:  # type: ignore[union-attr]
        return None
    for step in training.steps:
        if step.origin is not event.origin or not _single_statement(step):
            continue
        owner = model.owner(step.stmt)
        in_branch = isinstance(owner, cst.If) and training.guard(step).periodic
        after_micro_loop = training.style is Style.MICRO_LOOP and owner is step.loop.node  # type: ignore[union-attr]
        if in_branch or after_micro_loop:
            return step.stmt  # type: ignore[return-value]
    return None


def own_line(event: Event) -> bool:
    """The event's statement is a line of its own (no ``a(); b()``): it can move or be anchored to."""
    return isinstance(event.stmt, cst.SimpleStatementLine) and len(event.stmt.body) == 1


def _single_statement(event: Event) -> bool:
    """A line holding nothing but the event (not ``x = opt.step()``)."""
    small = event.stmt.body[0] if own_line(event) else None  # type: ignore[attr-defined]
    return small is event.node or isinstance(small, cst.Expr) and small.value is event.node
