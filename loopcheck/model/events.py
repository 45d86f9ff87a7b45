"""The vocabulary of the training-loop model: events, the conditions they run under, loops."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

# Gradient clipping calls, by their last name: torch, timm, Lightning, Accelerate.
CLIP_FUNCTIONS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "dispatch_clip_grad",
                  "clip_gradients", "adaptive_clip_grad"}


class Kind(enum.Enum):
    BACKWARD = "backward"
    STEP = "optimizer step"
    ZERO_GRAD = "zero grad"
    SCHEDULER_STEP = "scheduler step"
    EMA_UPDATE = "ema update"
    CLIP = "gradient clipping"
    SCALER_UNSCALE = "scaler unscale"
    SCALER_UPDATE = "scaler update"
    EVAL_MODE = "model.eval()"  # also model.train(False)
    TRAIN_MODE = "model.train()"
    STORE = "kept across iterations"  # `history.append(x)`: what is kept (``value``) may hold a graph
    LOADER_RESTART = "next(iter(loader))"
    GRAD_SYNC_FLAG = "require_backward_grad_sync ="  # DDP's no_sync flag set by hand (``value``)


class Framework(enum.Enum):
    """Who owns backward/step: plain PyTorch or a library that gates them itself."""

    TORCH = "torch"
    ACCELERATE = "accelerate"  # accelerator.backward: divides by N, prepared objects gate
    ENGINE = "engine"  # DeepSpeed-style engine.backward(loss) + engine.step()
    LIGHTNING = "lightning"  # self.manual_backward / fabric.backward
    LOSS_SCALER = "loss_scaler"  # timm/MAE/DeiT helpers owning backward and step


@dataclass(frozen=True)
class Cond:
    """One condition an event runs under: ``test`` (or its negation); ``test is None`` = unknown
    (an ``except`` handler, a ``match`` case)."""

    test: cst.BaseExpression | None
    negated: bool
    owner: cst.CSTNode  # the If/Try node: two events in different branches of one owner never both run
    branch: str
    # What the test means where it calls a predicate of the file (``if should_step(i, n):``): the
    # expression that predicate returns for these arguments (loopcheck.model.predicates)
    reads: cst.BaseExpression | None = None

    @property
    def meaning(self) -> cst.BaseExpression | None:
        """What the condition tests: the predicate's expression where ``test`` calls one, else ``test``."""
        return self.reads if self.reads is not None else self.test


@dataclass(frozen=True)
class Context:
    """A ``with`` item around an event: ``accumulate``, ``no_sync``, ``autocast``, ``no_grad``."""

    kind: str
    call: cst.BaseExpression
    # where the file writes it, where that is not ``call`` itself: the helper call ``maybe_no_sync(model,
    # is_last)`` whose choice ``call`` restates (``model.no_sync() if not is_last else nullcontext()``)
    site: cst.CSTNode | None = None


@dataclass(eq=False)
class Event:
    kind: Kind
    node: cst.CSTNode  # the call (or assignment) that is the event
    stmt: cst.CSTNode  # the statement holding it: suppression comments and fixes work on it
    receiver: str | None  # "optimizer", "self.scaler", "model"
    conds: tuple[Cond, ...]  # conditions between the enclosing loop's body and the event
    loop: Loop | None
    order: int  # position in execution order of one iteration (source order after inlining)
    contexts: tuple[Context, ...] = ()
    framework: Framework = Framework.TORCH
    loss: cst.BaseExpression | None = None  # BACKWARD: the loss expression back-propagated
    optimizer: str | None = None  # STEP via scaler.step(opt) / UNSCALE: the optimizer it acts on
    scaler: str | None = None  # STEP through a GradScaler or loss scaler
    closure: bool = False  # STEP(closure): LBFGS style, the closure owns zero_grad+backward
    has_args: bool = False  # SCHEDULER_STEP(epoch) / (metric)
    # ZERO_GRAD: "optimizer", "model" or "param"; CLIP: "param" where code the model read clips the
    # gradients themselves and unscales nothing (an in-place clamp, a helper of another module);
    # STORE: the method of a class of this file that keeps the value (``Metric.update``), if any
    target: str = ""
    # STORE: what is kept; GRAD_SYNC_FLAG: the flag's value; LOADER_RESTART: what the new iterator goes over
    value: cst.BaseExpression | None = None
    origin: cst.FunctionDef | None = None  # the function whose code holds it (None: module level)
    # Inlined from a function of the file: the call in the scope's own code that runs it, and its
    # statement (a finding about the loop as a whole points there, not into a helper shared by loops)
    site: tuple[cst.CSTNode, cst.CSTNode] | None = None
    # The loops without backward it was lifted out of, outermost first (``for k in range(c):``
    # inside a logging branch, a validation helper's ``for x in val_loader:``)
    lifted: tuple[Loop, ...] = ()
    # BACKWARD of a library method the class inherits and calls (``transformers.Trainer.training_step``)
    inherited: str = ""

    def in_context(self, kind: str) -> bool:
        return any(c.kind == kind for c in self.contexts)


@dataclass(eq=False)
class Assignment:
    """``name = value`` (``op`` is ``=`` or the augmented operator such as ``+=``, ``/=``)."""

    names: tuple[str, ...]
    value: cst.BaseExpression
    op: str
    node: cst.CSTNode
    conds: tuple[Cond, ...]
    order: int
    in_loop: cst.CSTNode | None = None  # set when lifted out of a loop that runs no backward
    contexts: tuple[Context, ...] = ()  # `with autocast(...)`, `with model.no_sync()` around it
    lifted: tuple[Loop, ...] = ()  # the loops without backward it was lifted out of, outermost first
    # the orders a call of a helper inlined into the loop spans, for a name local to that helper (the
    # caller's own names of that spelling are other variables); None for the loop's own names
    scope: tuple[int, int] | None = None

    def visible_at(self, order: int) -> bool:
        """Whether the name it binds is this binding at ``order``: a helper's local only within its call."""
        return self.scope is None or self.scope[0] <= order <= self.scope[1]

    def value_of(self, name: str) -> cst.BaseExpression | None:
        """The value ``name`` gets (``start_epoch, best = 0, 0.0`` gives it ``0``), None where an unpacked
        value does not show it (``a, b = f()``)."""
        if len(self.names) == 1:
            return self.value
        if isinstance(self.value, (cst.Tuple, cst.List)) and len(self.value.elements) == len(self.names):
            return self.value.elements[self.names.index(name)].value
        return None


@dataclass(eq=False)
class Loop:
    node: Union[cst.For, cst.While]
    parent: Loop | None
    conds: tuple[Cond, ...]  # guard of the loop statement inside its parent loop
    order: int
    function: cst.FunctionDef | None  # where the loop's statement lives
    items: list[Union[Event, Loop]] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    # Calls the model cannot see into that receive an optimizer (``helpers.step(optimizer)``):
    # they might zero or step, so rules about missing events stay silent.
    opaque_calls: list[cst.Call] = field(default_factory=list)
    # The conditions each of them runs under in this loop (by ``id`` of the call): one in a branch
    # that a variant's flags rule out (a `bmtrain` step function beside the plain PyTorch one) is
    # no call of that variant.
    opaque_conds: dict[int, tuple[Cond, ...]] = field(default_factory=dict)
    # What the loop iterates once names bound before it are followed (``pbar = tqdm(enumerate(dl))``).
    iterable: cst.BaseExpression | None = None
    # What names in the iterable were bound to before the loop (``it = tqdm(train_loader)``).
    iter_sources: list[cst.BaseExpression] = field(default_factory=list)
    # `if <test>: continue` (or break/return) at the top of the loop body, before any event.
    skips: list[cst.If] = field(default_factory=list)
    # In a variant of the loop: the truth value assumed for each invariant flag (see model.variants).
    assumptions: dict[str, bool] = field(default_factory=dict)
    # A function's pseudo-loop: names that may change from one call to the next, read as counters
    # there (its parameters, attributes the file increments such as `self.n_iter += 1`)
    per_call: frozenset[str] = frozenset()
    # An ignite process function's pseudo-loop: the counter ignite keeps of its calls
    # (`engine.state.iteration`: 1 on the first call of a run, never reset between epochs)
    engine_counter: str | None = None

    @property
    def is_loop(self) -> bool:
        """False for the pseudo-loop that stands for a whole function or module."""
        return type(self.node) in (cst.For, cst.While)

    @property
    def target(self) -> cst.BaseAssignTargetExpression | None:
        return self.node.target if isinstance(self.node, cst.For) else None

    @property
    def iter(self) -> cst.BaseExpression | None:
        if self.iterable is not None:
            return self.iterable
        return self.node.iter if isinstance(self.node, cst.For) else None

    def events(self, *kinds: Kind, deep: bool = False) -> list[Event]:
        """Events of this loop's own iteration (``deep``: also those of nested loops)."""
        out: list[Event] = []
        for item in self.items:
            if isinstance(item, Event):
                if not kinds or item.kind in kinds:
                    out.append(item)
            elif deep:
                out.extend(item.events(*kinds, deep=True))
        return out

    @property
    def loops(self) -> list[Loop]:
        return [item for item in self.items if isinstance(item, Loop)]

    def iterated(self) -> list[cst.BaseExpression]:
        """What the loop iterates as written, and with the names in it followed (``iter``, ``iter_sources``)."""
        written = self.node.iter if type(self.node) is cst.For else None
        return [e for e in (written, self.iter, *self.iter_sources) if e is not None]

    def nest(self) -> Iterator[Loop]:
        """This loop and every loop inside it."""
        yield self
        for sub in self.loops:
            yield from sub.nest()

    def assignments_before(self, name: str, order: int) -> list[Assignment]:
        """Assignments to ``name`` that run before ``order`` in one iteration, in execution order
        (lifted inner loops append theirs late, so the list itself is not in that order)."""
        return sorted((a for a in self.assignments if name in a.names and a.order < order), key=lambda a: a.order)

    def assigned_names(self) -> set[str]:
        names = {n for a in self.assignments for n in a.names}
        for sub in self.loops:
            names |= sub.assigned_names()
        return names
