"""One pass over a module that turns its loops into the training-loop model.

Statements are walked explicitly so that every event knows the conditions, ``with`` contexts
and loop it runs in; calls to functions of the same file are inlined at the call site (with their
parameters bound to the call's arguments), so a loop that calls ``train_step(batch)`` is seen
with the events of ``train_step``; so is a method of a class of the file called on an object built
from it (``model.optimize_parameters(current_iter, apply_gradient)``) where it steps under a test of
one of its parameters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import CLIP_FUNCTIONS, Assignment, Cond, Context, Event, Framework, Kind, Loop
from loopcheck.model.distributed import conditional_no_sync, helper_no_sync
from loopcheck.model.from_ast import conjunction
from loopcheck.model.guards import unwrap_iterable
from loopcheck.model.ignite import iteration_counter
from loopcheck.model.index import EVENT_METHODS, Index
from loopcheck.model.inherited import STEP_METHODS, TRAINER, divided_loss, inherited_step, model_argument, trainer_subclass_methods
from loopcheck.model.iterators import counted_part, first_batch_of, is_data_loop, iterated, taken_from
from loopcheck.model.predicates import predicate_test, predicate_value
from loopcheck.model.roles import Role
from loopcheck.model.running_sums import is_number, kept_arguments
from loopcheck.model.syntax import (
    EXITS,
    calls,
    dotted,
    exit_statement,
    func_name,
    last_part,
    last_small,
    lines,
    method,
    own_call_name,
    names_in,
    positional,
    receiver,
    source as text_of,
    target_names,
    walk,
)
from loopcheck.model.values import clips_nothing
from loopcheck.patterns import Pattern
from loopcheck.project.state_init import empty_state_test

if TYPE_CHECKING:
    from loopcheck.project import Imported

_ENGINE_RECEIVERS = {"model", "model_engine", "engine", "trainer", "ds_engine", "deepspeed_engine", "net"}
_MAX_INLINE_DEPTH = 6  # a k-fold run -> epochs -> epoch -> batches -> step: five calls deep (giotto-deep)
# calls that take an optimizer and never clear its gradients
_LEAVES_GRADIENTS = {"hasattr", "getattr", "isinstance", "vars", "str", "repr", "print", "len", "id", "type",
                     "amp.scale_loss", "amp.master_params", "apex.amp.scale_loss", "apex.amp.master_params"}
_PREDICATE_TESTS = (cst.Call, cst.UnaryOperation)  # `if should_step(i):`, `if not should_step(i):`
_OPTIMIZERS = Pattern(r"optim|^opts?$|_opts?$", re.I)
_PROGRESS_BARS = {"tqdm", "trange", "track"}  # wrappers of an iterable a `with` statement may bind
_EMA_UPDATE = Pattern(r"^(update_ema|ema_update|update_ema_model|ema_step|step_ema)$", re.I)


@dataclass(frozen=True)
class _State:
    loop: Loop
    conds: tuple[Cond, ...] = ()
    contexts: tuple[Context, ...] = ()
    inlining: tuple[cst.FunctionDef, ...] = ()
    function: cst.FunctionDef | None = None
    # the outermost call inlined in the current loop's own code, and its statement
    site: tuple[cst.CSTNode, cst.CSTNode] | None = None
    # `with amp.scale_loss(loss, optimizer) as scaled_loss:` around the code: the name and the loss it scales
    scaled: tuple[tuple[str, cst.BaseExpression], ...] = ()


class Builder:
    def __init__(self, module: cst.Module, index: Index, project: Imported | None = None) -> None:
        self.module = module
        self.index = index
        self._calls: dict[cst.CSTNode, list[cst.Call]] = {}  # see _calls_in
        self.project = project  # what the project modules this file imports do (loopcheck.project)
        self.roles = index.roles
        self.order = 0
        self.inlined: set[cst.FunctionDef] = set()
        self.nested_exits: dict[cst.If, cst.BaseExpression] = {}  # `if a: if b: return` -> `a and b`
        self.owners: dict[cst.CSTNode, cst.CSTNode] = {}  # statement -> the block statement holding it
        # method -> the first base of its class, where that is a name (`Trainer(BaseTrainer)`)
        self.bases: dict[cst.FunctionDef, str] = {}
        # methods of `transformers.Trainer` subclasses that inherit its `training_step`
        self.trainer_methods: set[cst.FunctionDef] = set()
        if index.imports and not index.attributes.isdisjoint(STEP_METHODS):
            self.trainer_methods = trainer_subclass_methods(
                module, index.imports, project.inherits_trainer_step if project is not None else None)
        self._owners: dict[str, dict[str, list[cst.FunctionDef]]] | None = None  # see _method_owners
        self._kept: dict[cst.FunctionDef, tuple[int, ...]] = {}  # see _kept_by_own_class
        self._mode_methods: dict[str, tuple[str, ...] | None] = {}  # see _train_mode_method
        if project is not None:
            for stmt in module.body:
                if type(stmt) is cst.ClassDef and stmt.bases and type(stmt.body) is cst.IndentedBlock:
                    first = dotted(stmt.bases[0].value) if stmt.bases[0].keyword is None else None
                    if first is not None:
                        self.bases.update((m, first) for m in stmt.body.body if isinstance(m, cst.FunctionDef))

    # -- scopes ---------------------------------------------------------------------------
    def scope(self, node: cst.Module | cst.FunctionDef) -> Loop:
        """Model one function (or the module's top level) as a pseudo-loop holding its loops."""
        fn = node if isinstance(node, cst.FunctionDef) else None
        scope = Loop(node=node, parent=None, conds=(), order=self._next(), function=fn)  # type: ignore[arg-type]
        body = lines(node.body) if isinstance(node, cst.FunctionDef) else node.body
        if fn is not None:
            params = {p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]} - {"self", "cls"}
            scope.per_call = frozenset(params | {f"self.{name}" for name in self.index.incremented})
            if fn in self.index.process_functions:
                scope.engine_counter = iteration_counter(fn)
        self._block(body, _State(loop=scope, function=fn, inlining=(fn,) if fn else ()), node)
        _lift_loops_without_backward(scope)
        _flatten_optimizer_loops(scope)
        _flatten_chunk_loops(scope)
        return scope

    def _next(self) -> int:
        self.order += 1
        return self.order

    # -- statements -----------------------------------------------------------------------
    def _block(self, body: Sequence[cst.CSTNode], st: _State, owner: cst.CSTNode) -> None:
        conds, contexts = st.conds, st.contexts
        for stmt in body:
            self.owners[stmt] = owner
            self._statement(stmt, st if conds is st.conds and contexts is st.contexts
                            else replace(st, conds=conds, contexts=contexts))
            switch = _grad_switch(stmt)
            if switch is not None:
                # `torch.set_grad_enabled(False)` as a statement: what follows in the block runs as
                # under `with torch.no_grad():`, until `torch.set_grad_enabled(True)`
                call, enabled = switch
                contexts = tuple(c for c in contexts if _grad_switch_call(c.call) is None) if enabled \
                    else contexts + (Context("no_grad", call),)
            exit_test = _early_exit_test(stmt, self.nested_exits)
            if exit_test is None:
                continue
            if owner is st.loop.node and st.loop.is_loop and not _has_events(st.loop):
                # A `continue`/`break` at the top of a loop, before anything trains (a resume skip,
                # a max-steps stop, a skipped bad batch), drops whole iterations: what follows runs
                # on every iteration that trains at all. The loop remembers it (a stop can cut the
                # last accumulation window short).
                st.loop.skips.append(stmt)
            else:
                reads = predicate_test(exit_test, self.index.functions) if type(exit_test) in _PREDICATE_TESTS else None
                conds = conds + (Cond(exit_test, True, stmt, "after-exit", reads),)

    def _statement(self, stmt: cst.CSTNode, st: _State) -> None:
        kind = type(stmt)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            # a line of its own, or the body written after the colon (`if c: opt.step(); opt.zero_grad()`)
            for small in stmt.body:
                self._small(small, stmt, st)
        elif kind is cst.If:
            self._if(stmt, st, stmt)
        elif kind is cst.For or kind is cst.While:
            self._loop(stmt, st)
        elif kind is cst.With:
            contexts = st.contexts + tuple(c for item in stmt.items
                                           if (c := _context(item.item) or _bound_no_sync(item.item, st)
                                               or _helper_no_sync(item.item, self.index.functions)))
            self._calls_in(stmt.items, stmt, st)
            for item in stmt.items:
                # `with tqdm(train_dl) as pbar:`, then `for idx, batch in enumerate(pbar):`: the loader
                if type(item.item) is cst.Call and last_part(func_name(item.item) or "") in _PROGRESS_BARS \
                        and item.asname is not None and type(item.asname.name) is cst.Name:
                    st.loop.assignments.append(Assignment((item.asname.name.value,), item.item, "=", stmt, st.conds,
                                                          self._next(), contexts=st.contexts))
            scaled = st.scaled + tuple(bound for item in stmt.items if (bound := _apex_scaled(item)))
            self._block(lines(stmt.body), replace(st, contexts=contexts, scaled=scaled), stmt)
        elif kind is cst.Try or kind.__name__ == "TryStar":
            self._block(lines(stmt.body), st, stmt)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                self._block(lines(handler.body), replace(st, conds=st.conds + (Cond(None, False, stmt, "except"),)),
                            handler)
            if stmt.orelse is not None:  # type: ignore[attr-defined]
                self._block(lines(stmt.orelse.body), st, stmt.orelse)  # type: ignore[attr-defined]
            if stmt.finalbody is not None:  # type: ignore[attr-defined]
                self._block(lines(stmt.finalbody.body), st, stmt.finalbody)  # type: ignore[attr-defined]
        elif kind is cst.Match:
            for case in stmt.cases:
                self._block(lines(case.body), replace(st, conds=st.conds + (Cond(None, False, stmt, "case"),)), case)
        # FunctionDef / ClassDef: modelled where they are called, or as scopes of their own.

    def _if(self, node: cst.If, st: _State, owner: cst.If) -> None:
        self._calls_in([node.test], node, st)
        reads = predicate_test(node.test, self.index.functions) if type(node.test) in _PREDICATE_TESTS else None
        self._block(lines(node.body), replace(st, conds=st.conds + (Cond(node.test, False, owner, "body", reads),)),
                    node)
        negated = st.conds + (Cond(node.test, True, owner, "orelse", reads),)
        if isinstance(node.orelse, cst.If):
            self._if(node.orelse, replace(st, conds=negated), owner)
        elif isinstance(node.orelse, cst.Else):
            self._block(lines(node.orelse.body), replace(st, conds=negated), node.orelse)

    def _loop(self, node: cst.For | cst.While, st: _State) -> None:
        self._calls_in([node.iter if isinstance(node, cst.For) else node.test], node, st)
        loop = Loop(node=node, parent=st.loop, conds=st.conds, order=self._next(), function=st.function)
        st.loop.items.append(loop)
        if isinstance(node, cst.For):
            resolved = _resolve_iterable(node.iter, st.loop)
            loop.iterable = resolved if resolved is not node.iter else None
            counted = counted_part(resolved)
            loop.iter_sources = [v for part in counted for v in _bound_values(part, st.loop)] \
                + [v for part in counted for v in self._passed_in(part, st)]
            loop.assignments.append(
                Assignment(tuple(target_names(node.target)), resolved, "for", node, (), loop.order))
        self._block(lines(node.body), replace(st, loop=loop, conds=(), site=None), node)
        if node.orelse is not None:
            self._block(lines(node.orelse.body), st, node.orelse)

    def _small(self, small: cst.BaseSmallStatement, stmt: cst.SimpleStatementLine, st: _State) -> None:
        kind = type(small)  # exact types, as in _statement
        if (kind is cst.Assign or kind is cst.AugAssign or kind is cst.AnnAssign) and small.value is not None:
            targets = ([t.target for t in small.targets] if kind is cst.Assign else [small.target])
            op = "=" if kind is not cst.AugAssign else type(small.operator).__name__
            self._calls_in([small.value], stmt, st)
            for target in targets:
                names = tuple(target_names(target))
                st.loop.assignments.append(
                    Assignment(names, small.value, op, small, st.conds, self._next(), contexts=st.contexts))
                if type(target) is not cst.Attribute:
                    continue
                if target.attr.value == "grad" and _clears(small.value):
                    self._event(st, Kind.ZERO_GRAD, small, stmt, receiver(target.value), target="param")
                elif target.attr.value == "require_backward_grad_sync":
                    self._event(st, Kind.GRAD_SYNC_FLAG, small, stmt, receiver(target.value), value=small.value)
            return
        if kind is cst.Expr and type(small.value) is cst.Call and type(small.value.func) is cst.Name \
                and small.value.func.value == "exec":
            # nanoGPT's `exec(open('configurator.py').read())`: every name bound before it may be
            # overridden from the command line or a config file (`--hess_clip=True`): none is a constant
            order = self._next()
            bound = {n for a in st.loop.assignments if a.order < order for n in a.names}
            st.loop.assignments.extend(Assignment((n,), small.value, "=", small, st.conds, order,
                                                  contexts=st.contexts) for n in sorted(bound))
        if kind is cst.Expr and type(small.value) is cst.IfExp:
            # `model.eval() if k < n else model.train()` as a statement: an if/else, each call under its branch
            ifexp = small.value
            self._calls_in([ifexp.test], stmt, st)
            self._calls_in([ifexp.body], stmt, replace(st, conds=st.conds + (Cond(ifexp.test, False, ifexp, "body"),)))
            self._calls_in([ifexp.orelse], stmt, replace(st, conds=st.conds + (Cond(ifexp.test, True, ifexp, "orelse"),)))
            return
        self._calls_in([small], stmt, st)

    # -- calls ----------------------------------------------------------------------------
    def _calls_in(self, nodes: Sequence[cst.CSTNode], stmt: cst.CSTNode, st: _State) -> None:
        found: list[cst.Call] = []
        for node in nodes:
            known = self._calls.get(node)  # a function inlined at several calls is read once
            if known is None:
                known = self._calls[node] = calls(node)
            found.extend(known)
        # Inner calls run first: `scaler.scale(loss).backward()` scales, then back-propagates.
        for call in reversed(found):
            self._call(call, stmt, st)

    def _call(self, call: cst.Call, stmt: cst.CSTNode, st: _State) -> None:
        imported = self.project.events(call, self.roles) if self.project is not None else None
        if imported:  # a wrapper from another module of the project: its events, at this call
            for kind, recv, fields in imported:
                self._event(st, kind, call, stmt, recv, **fields)
            return
        if self.trainer_methods and self._inherited_step(call, stmt, st):
            return
        if self.bases and self._base_method(call, stmt, st):
            return
        before = len(st.loop.items)
        self._classify(call, stmt, st)
        target = self._same_file_function(call, st)
        partial = None if target is not None else self._partial_of(call, st)
        if partial is not None:
            target, bound_first = partial
            self._inline(target, call, stmt, st, bound_first)
        elif target is not None:
            self._inline(target, call, stmt, st)
        elif len(st.loop.items) == before and any(
                self.roles.of(dotted(a.value)) is Role.OPTIMIZER for a in call.args if dotted(a.value)) \
                and not self._leaves_gradients(call):
            _opaque(st.loop, call, st.conds)

    def _inherited_step(self, call: cst.Call, stmt: cst.CSTNode, st: _State) -> bool:
        """``self.training_step(model, inputs)`` of a ``transformers.Trainer`` subclass that does not
        override it: one micro-batch of the library's method, ``model.train()``, then the backward of
        the loss divided by the accumulation count (``loopcheck.model.inherited``)."""
        name = inherited_step(call, st.inlining[-1] if st.inlining else st.function, self.trainer_methods)
        if name is None or name in self.index.functions:
            return False
        model = dotted(model_argument(call))
        if model is not None:
            self._event(st, Kind.TRAIN_MODE, call, stmt, model)
        self._event(st, Kind.BACKWARD, call, stmt, None, loss=divided_loss(call), inherited=f"{TRAINER}.{name}")
        return True

    def _leaves_gradients(self, call: cst.Call) -> bool:
        """A call handed an optimizer that cannot clear its gradients: a Python built-in (`hasattr`,
        `vars`), apex's loss scaling (`amp.scale_loss(loss, optimizer)`), a class built around it (a
        scheduler, an optimizer wrapper), a function of another project module (whose facts would have
        given its clearing as an event here), or a function of this file with no training event that only
        reads the optimizer (`adjust_learning_rate(optimizer, epoch)` setting `param_group["lr"]`)."""
        name = func_name(call)
        if name is None:
            return isinstance(call.func, cst.Attribute) and call.func.attr.value == "format"
        if name in _LEAVES_GRADIENTS or last_part(name)[:1].isupper():
            return True
        if self.project is not None and self.project.defines(call):
            return True  # its facts hold any clearing it does, which the call's events would show
        own = own_call_name(call)
        candidates = self.index.functions.get(own, []) if own is not None else []
        if len(candidates) != 1 or candidates[0] in self.index.eventful:
            return False
        fn = candidates[0]
        params = [p.name.value for p in fn.params.params if p.name.value != "self"]
        handed = {params[i] for i, a in enumerate(call.args) if a.keyword is None and not a.star and i < len(params)
                  and self.roles.of(dotted(a.value)) is Role.OPTIMIZER}
        handed |= {a.keyword.value for a in call.args if a.keyword is not None
                   and self.roles.of(dotted(a.value)) is Role.OPTIMIZER}
        for node in walk(fn.body, into_functions=True):
            if isinstance(node, cst.Attribute) and node.attr.value == "grad":
                return False
            if isinstance(node, cst.Call) and any(dotted(a.value) in handed for a in node.args) \
                    and func_name(node) not in _LEAVES_GRADIENTS:
                return False  # handed on to what this file cannot see into (`hasattr(optimizer, ...)` reads)
        return bool(handed)

    def _base_method(self, call: cst.Call, stmt: cst.CSTNode, st: _State) -> bool:
        """``self.optimizer_step()`` where this file defines no such method and the class's first base
        is a class of another project module that does: its events at this call (True), or the call
        kept as one the model cannot see into where that method may do more than its facts say."""
        name = own_call_name(call)
        function = st.inlining[-1] if st.inlining else st.function
        base = self.bases.get(function) if function is not None else None  # type: ignore[arg-type]
        if base is None or name is None or not isinstance(call.func, cst.Attribute) or name in self.index.functions:
            return False
        assert self.project is not None
        found = self.project.base_events(call, self.roles, base)
        if found is None:
            _opaque(st.loop, call, st.conds)
            return False
        for kind, recv, fields in found:
            gates: tuple[Cond, ...] = fields.pop("conds", ())  # type: ignore[assignment]
            self._event(replace(st, conds=st.conds + gates) if gates else st, kind, call, stmt, recv, **fields)
        return bool(found)

    def _event(self, st: _State, kind: Kind, node: cst.CSTNode, stmt: cst.CSTNode, recv: str | None,
               **fields: object) -> None:
        if kind is Kind.STEP and any(not c.negated and c.test is not None and empty_state_test(text_of(c.test))
                                     for c in st.conds):
            return  # a step that only creates the optimizer's state (loopcheck.project.state_init)
        event = Event(kind=kind, node=node, stmt=stmt, receiver=recv, conds=st.conds, loop=st.loop,
                      order=self._next(), contexts=st.contexts, origin=st.inlining[-1] if st.inlining else None,
                      site=st.site, **fields)  # type: ignore[arg-type]
        st.loop.items.append(event)

    def _classify(self, call: cst.Call, stmt: cst.CSTNode, st: _State) -> None:
        called = method(call)
        args = positional(call)
        if called is None:
            name = func_name(call) or ""
            short = last_part(name)
            if name == "next" and args:
                self._next_batch(call, stmt, st)
            elif short in CLIP_FUNCTIONS:
                if not clips_nothing(call, self.index):
                    self._event(st, Kind.CLIP, call, stmt, name)
            elif name.endswith("autograd.backward") and args:
                self._event(st, Kind.BACKWARD, call, stmt, None, loss=args[0])
            elif "scaler" in short.lower() and _is_loss_scaler_call(call):
                self._loss_scaler(call, stmt, st, name)
            elif "ema" in short.lower() and "update" in short.lower():
                self._event(st, Kind.EMA_UPDATE, call, stmt, name)
            elif "zero_grad" in short:  # helpers such as `zero_grad(model_params)`
                self._event(st, Kind.ZERO_GRAD, call, stmt, name, target="param")
            else:
                bound = self._bound_step(call)
                if bound is not None:
                    recv = receiver(bound)
                    self._step(call, recv, self.roles.of(recv), [], stmt, st)
            return
        recv_expr, name = called
        if name in ("next", "__next__") and not call.args:
            # `iter(loader).next()`, `loader.__iter__().__next__()`: method spellings of `next(iter(loader))`
            self._next_batch(call, stmt, st)
            return
        recv = receiver(recv_expr)
        role = self.roles.of(recv)
        if name == "backward":
            self._backward(call, recv_expr, recv, role, stmt, st)
        elif name == "manual_backward" and args:
            self._event(st, Kind.BACKWARD, call, stmt, recv, loss=args[0], framework=Framework.LIGHTNING)
        elif name == "__call__" and "scaler" in recv.lower() and _is_loss_scaler_call(call):
            self._loss_scaler(call, stmt, st, recv)
        elif name == "step":
            self._step(call, recv, role, args, stmt, st)
        elif name == "step_update" and role is not Role.OPTIMIZER:
            self._event(st, Kind.SCHEDULER_STEP, call, stmt, recv, has_args=True)
        elif name == "zero_grad":
            target = "optimizer" if role in (Role.OPTIMIZER, Role.ENGINE) else "model"
            self._event(st, Kind.ZERO_GRAD, call, stmt, recv, target=target)
        elif name == "update" and role is Role.SCALER:
            self._event(st, Kind.SCALER_UPDATE, call, stmt, recv)
        elif name in ("update", "update_parameters", "update_model_average") and role is Role.EMA \
                and not _averages_a_number(args):
            self._event(st, Kind.EMA_UPDATE, call, stmt, recv)
        elif _EMA_UPDATE.search(name) and name not in self.index.functions:
            # `task.update_ema(step=n)` (timm's task wrapper), `trainer.ema_update()`: a method of
            # another module that updates the EMA it holds (a method of this file is inlined instead)
            self._event(st, Kind.EMA_UPDATE, call, stmt, recv)
        elif name == "unscale_" and role is Role.SCALER:
            self._event(st, Kind.SCALER_UNSCALE, call, stmt, recv,
                        optimizer=receiver(args[0]) if args else None)
        elif name in CLIP_FUNCTIONS and not (recv == "self" and name in self.index.functions):
            # (`self.clip_gradients()` of a class of this file is its own helper: its body is inlined)
            if not clips_nothing(call, self.index):
                self._event(st, Kind.CLIP, call, stmt, recv)
        elif name == "clamp_" and recv.endswith((".grad", ".grad.data")):
            # `param.grad.data.clamp_(-c, c)` (a `clip_gradient(optimizer, c)` helper's loop): value clipping
            self._event(st, Kind.CLIP, call, stmt, recv, target="param")
        elif name == "zero_" and (recv.endswith(".grad") or recv.endswith(".grad.data")):
            self._event(st, Kind.ZERO_GRAD, call, stmt, recv, target="param")
        elif name == "eval" and not call.args:
            self._event(st, Kind.EVAL_MODE, call, stmt, recv)
        elif name == "train" and len(call.args) <= 1 and role in (Role.UNKNOWN, Role.EMA):
            # an averaged copy (`swa_model.train()`) switches modes as its `eval()` does
            mode = args[0] if args else next((a.value for a in call.args if a.keyword and a.keyword.value == "mode"),
                                             None)  # `model.train(mode=False)`
            off = isinstance(mode, cst.Name) and mode.value == "False"
            self._event(st, Kind.EVAL_MODE if off else Kind.TRAIN_MODE, call, stmt, recv)
        elif name in ("append", "extend") and len(args) == 1:
            self._event(st, Kind.STORE, call, stmt, recv, value=args[0])
        elif role is Role.UNKNOWN and recv != "self" and name in self.index.functions \
                and (parts := self._train_mode_method(name)):
            for part in parts:  # `discriminator.train_custom()`: `self.classifier_head.train()` inside
                self._event(st, Kind.TRAIN_MODE, call, stmt, f"{recv}.{part}" if part else recv)
        elif args and role is Role.UNKNOWN and name in self._method_owners():
            self._kept_by_own_class(call, recv, name, args, stmt, st)

    def _kept_by_own_class(self, call: cst.Call, recv: str, name: str, args: list[cst.BaseExpression],
                           stmt: cst.CSTNode, st: _State) -> None:
        """``train_loss.update(loss)`` on an object built from a class of this file whose ``update``
        adds its argument into a sum or a list of the object (``loopcheck.model.running_sums``): the
        object keeps what is handed in across calls, as a list keeps what is appended."""
        built = self.roles.constructed.get(last_part(recv), [])
        classes = {func_name(c) for c in built}
        if len(classes) != 1:
            return
        owner = next(iter(classes)) or ""
        methods = self._method_owners()[name].get(owner, [])
        if len(methods) != 1:
            return
        fn = methods[0]
        kept = self._kept.get(fn)
        if kept is None:
            kept = self._kept[fn] = kept_arguments(fn)
        for position in kept:
            if position < len(args) and not is_number(args[position]):
                self._event(st, Kind.STORE, call, stmt, recv, value=args[position], target=f"{owner}.{name}")

    def _next_batch(self, call: cst.Call, stmt: cst.CSTNode, st: _State) -> None:
        """A batch taken from an iterator made on the spot (``next(iter(loader))``), or from one bound
        in this loop's own iteration (``it = iter(loader)`` then ``next(it)``, the binding running
        whenever the ``next`` does): either way a new pass over the loader."""
        source = first_batch_of(call)
        if source is not None:
            self._event(st, Kind.LOADER_RESTART, call, stmt, receiver(source), value=source)
            return
        it = taken_from(call)
        if not isinstance(it, cst.Name):
            return
        bound = next((a for a in reversed(st.loop.assignments) if a.names == (it.value,)), None)
        if bound is None or bound.op != "=" or st.conds[: len(bound.conds)] != bound.conds:
            return  # bound before the loop, under a test of its own (a refresh), or not bound to an iterator
        source = iterated(bound.value)
        if source is not None:
            self._event(st, Kind.LOADER_RESTART, call, stmt, receiver(source), value=source)

    def _backward(self, call: cst.Call, recv_expr: cst.BaseExpression, recv: str, role: Role,
                  stmt: cst.CSTNode, st: _State) -> None:
        args = positional(call)
        if args and _is_framework_backward(recv, role, args[0]):
            framework = {Role.ACCELERATOR: Framework.ACCELERATE}.get(role, Framework.ENGINE)
            if last_part(recv) == "fabric":
                framework = Framework.LIGHTNING
            self._event(st, Kind.BACKWARD, call, stmt, recv, loss=args[0], framework=framework)
            return
        if isinstance(recv_expr, cst.Call) and func_name(recv_expr) in ("cast", "typing.cast") \
                and len(positional(recv_expr)) == 2:
            recv_expr = positional(recv_expr)[1]  # `cast(torch.Tensor, scaler.scale(loss))`: a type checker's view
        loss: cst.BaseExpression = recv_expr
        scaler = None
        if isinstance(recv_expr, cst.Name) and st.scaled:
            # apex's `scaled_loss.backward()`: the loss is what `amp.scale_loss` scales (its scale is
            # undone before the step, as a GradScaler's is)
            loss = next((value for name, value in reversed(st.scaled) if name == recv_expr.value), loss)
        if isinstance(recv_expr, cst.Call):
            scaled = method(recv_expr)
            inner = positional(recv_expr)
            if scaled is not None and scaled[1] == "scale" and inner:
                loss, scaler = inner[0], receiver(scaled[0])
        self._event(st, Kind.BACKWARD, call, stmt, recv, loss=loss, scaler=scaler)

    def _step(self, call: cst.Call, recv: str, role: Role, args: list[cst.BaseExpression],
              stmt: cst.CSTNode, st: _State) -> None:
        stepped = args[0] if args else next(  # `scaler.step(optimizer=self.optimizer)` (ml-cvnets)
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == "optimizer"), None)
        if role is Role.SCALER and stepped is not None:
            self._event(st, Kind.STEP, call, stmt, receiver(stepped), scaler=recv, optimizer=receiver(stepped))
        elif role is Role.SCHEDULER:
            self._event(st, Kind.SCHEDULER_STEP, call, stmt, recv, has_args=bool(call.args))
        elif role is Role.EMA:
            self._event(st, Kind.EMA_UPDATE, call, stmt, recv)
        elif role is Role.OPTIMIZER:
            closure = bool(args) or any(a.keyword is not None and a.keyword.value == "closure" for a in call.args)
            self._event(st, Kind.STEP, call, stmt, recv, optimizer=recv, closure=closure)
        elif role is Role.ENGINE or (not call.args and "backward" in self.index.methods_called.get(last_part(recv), ())):
            self._event(st, Kind.STEP, call, stmt, recv, optimizer=recv, framework=Framework.ENGINE)

    def _bound_step(self, call: cst.Call) -> cst.BaseExpression | None:
        """``step_func()`` where the file binds ``step_func`` once, to an optimizer's bound ``step``
        (``step_func = optimizer.step``, or ``step_func = get_step_func(optimizer=opt)`` with a
        function of the file that returns ``optimizer.step``): what that ``step`` is called on."""
        if type(call.func) is not cst.Name or call.args:
            return None
        values = self.index.values.get(call.func.value, [])
        if len(values) != 1:
            return None
        value = values[0]
        if type(value) is cst.Call:
            value = predicate_value(value, self.index.functions)
        if type(value) is not cst.Attribute or value.attr.value != "step":
            return None
        return value.value if self.roles.of(receiver(value.value)) is Role.OPTIMIZER else None

    def _loss_scaler(self, call: cst.Call, stmt: cst.CSTNode, st: _State, name: str) -> None:
        """timm/MAE/DeiT ``loss_scaler(loss, optimizer, ..., update_grad=cond)``: owns backward+step."""
        args = positional(call)
        self._event(st, Kind.BACKWARD, call, stmt, name, loss=args[0], framework=Framework.LOSS_SCALER)
        gate = next((a.value for a in call.args if a.keyword is not None
                     and a.keyword.value in ("update_grad", "need_update")), None)
        gated = replace(st, conds=st.conds + ((Cond(gate, False, call, "keyword"),) if gate is not None else ()))
        optimizer = receiver(args[1]) if len(args) > 1 else None
        self._event(gated, Kind.STEP, call, stmt, optimizer, optimizer=optimizer, scaler=name,
                    framework=Framework.LOSS_SCALER)

    def _passed_in(self, iterable: cst.BaseExpression, st: _State) -> list[cst.BaseExpression]:
        """What the file's calls of the function pass for the parameters an iterable of its own loop
        reads (``for i in range(iters_per_epoch)`` in a method called as
        ``self._inner_loop(iters_per_epoch=len(data_loader), ...)``). An inlined function's parameters
        are bound at the call site instead."""
        fn = st.function
        if fn is None or st.inlining != (fn,):
            return []
        params = {p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]}
        rebound: set[str] = set()  # bound again before the loop, in the function or an enclosing loop
        outer: Loop | None = st.loop
        while outer is not None:
            rebound.update(n for a in outer.assignments for n in a.names)
            outer = outer.parent
        found: list[cst.BaseExpression] = []
        for name in sorted(names_in(iterable) & params - rebound):
            found.extend(self.index.arguments.get(f"{fn.name.value}({name})", []))
        return found

    # -- inlining -------------------------------------------------------------------------
    def _same_file_function(self, call: cst.Call, st: _State) -> cst.FunctionDef | None:
        if len(st.inlining) >= _MAX_INLINE_DEPTH:
            return None
        outside = not st.loop.is_loop  # outside loops a function is modelled as a scope of its own
        if outside and (st.inlining != (st.function,) or st.function in self.index.with_loops):
            return None
        name = own_call_name(call)
        if name is None:
            found = self._object_method(call)
            if found is None or found in st.inlining or not st.loop.is_loop:
                return None
            return found
        candidates = [f for f in self.index.functions.get(name, []) if f not in st.inlining]
        if len(candidates) > 1:
            # a base class's abstract stub beside the one subclass of the file that overrides it (a
            # template-method trainer: the base loop calls `self.train_one_step(batch)`)
            candidates = [f for f in candidates if not _abstract(f)]
        if len(candidates) != 1 or candidates[0] not in self.index.eventful:
            return None
        if outside and not (st.conds and self._stepping_helper_call(st)) \
                and not self._backward_helper_call(st, candidates[0]) and not self._clipping_helper_call(st, candidates[0]):
            return None
        return candidates[0]

    def _clipping_helper_call(self, st: _State, helper: cst.FunctionDef) -> bool:
        """A step function (no loop of its own) that has back-propagated and steps itself calls a helper
        of the file that clips and does nothing else a training loop does
        (``maybe_apply_gradient_clipping_to_model(model, max_norm)``): the clip is the function's own,
        read in place, on every call the helper is called on."""
        fn = st.function
        if fn is None or st.loop.node is not fn or not st.loop.events(Kind.BACKWARD) or helper in self.index.with_loops:
            return False
        clips = any(isinstance(n, cst.Call) and last_part(func_name(n) or "") in CLIP_FUNCTIONS for n in walk(helper.body))
        return clips and not any(_calls_method(helper, name) for name in ("backward", "step", "zero_grad"))

    def _object_method(self, call: cst.Call) -> cst.FunctionDef | None:
        """The method of a class of this file that ``model.optimize_parameters(current_iter,
        apply_gradient)`` runs in a loop (BasicSR's model classes): the receiver is built from that
        class in the file (``model = SRModel(opt)``), or bound nowhere in the file (a parameter)
        while that class is the only one of the file that defines the method. Its parameters are
        bound to the call's arguments like those of a function of the file, so its ``if
        apply_gradient:`` reads the loop's own step test. Methods the model reads as events
        (``step``, ``update``, ``backward``...) and receivers with a role are left alone."""
        func = call.func
        if type(func) is not cst.Attribute or type(func.value) not in (cst.Name, cst.Attribute):
            return None
        recv = dotted(func.value)
        name = func.attr.value
        if recv is None or recv == "self" or name in EVENT_METHODS or name.startswith("_") \
                or any(w in name.lower() for w in ("backward", "zero_grad", "scaler", "ema")) \
                or self.roles.of(recv) is not Role.UNKNOWN:
            return None
        owners = self._method_owners().get(name, {})
        if len(self.index.functions.get(name, [])) != sum(len(v) for v in owners.values()):
            return None  # a function of that name too: not only methods
        short = last_part(recv)
        built = self.roles.constructed.get(short, [])
        if built:
            classes = {func_name(c) for c in built}
            if len(classes) != 1 or next(iter(classes)) not in owners:
                return None
            methods = owners[next(iter(classes))]
        elif short not in self.index.values and len(owners) == 1:
            methods = next(iter(owners.values()))
        else:
            return None
        if len(methods) != 1 or methods[0] not in self.index.eventful:
            return None
        fn = methods[0]
        params = fn.params.params
        if not params or params[0].name.value != "self" or fn.decorators:
            return None
        return fn if _steps_on_parameter(fn, {p.name.value for p in params[1:]}) else None

    def _train_mode_method(self, name: str) -> tuple[str, ...] | None:
        """What ``obj.<name>()`` puts in train mode, where ``name`` is only ever a method of the file's
        top-level classes and each of them puts parts of ``self`` in train mode (``mode_methods``)."""
        if name not in self._mode_methods:
            from loopcheck.model.mode_methods import train_mode_targets

            owners = self._method_owners().get(name, {})
            definitions = [fn for fns in owners.values() for fn in fns]
            self._mode_methods[name] = train_mode_targets(definitions) if definitions and \
                len(self.index.functions.get(name, [])) == len(definitions) else None
        return self._mode_methods[name]

    def _method_owners(self) -> dict[str, dict[str, list[cst.FunctionDef]]]:
        """Method name -> the top-level classes of the file that define it -> those definitions."""
        if self._owners is None:
            self._owners = {}
            for stmt in self.module.body:
                if type(stmt) is cst.ClassDef and type(stmt.body) is cst.IndentedBlock:
                    for m in stmt.body.body:
                        if type(m) is cst.FunctionDef:
                            self._owners.setdefault(m.name.value, {}).setdefault(stmt.name.value, []).append(m)
        return self._owners

    def _backward_helper_call(self, st: _State, helper: cst.FunctionDef) -> bool:
        """A step function (no loop of its own) that has not back-propagated yet calls a helper of the
        file that back-propagates and steps nothing (``backward_step(optimizer, model, loss, args)``),
        and steps itself (``if step % N == 0: optimizer.step()``): the helper's backward is the
        function's own, read in place, so the function accumulates across its calls."""
        fn = st.function
        if fn is None or st.loop.node is not fn or st.loop.events(Kind.BACKWARD) or helper in self.index.with_loops:
            return False
        return _calls_method(helper, "backward") and not _calls_method(helper, "step") and _calls_method(fn, "step")

    def _stepping_helper_call(self, st: _State) -> bool:
        """A step function (no loop of its own: called once per micro-batch) that has back-propagated
        and then, under a condition, calls a function of the file (``if step % N == 0:
        update_model_params(...)``): that helper's step is the function's own, read in place."""
        fn = st.function
        return fn is not None and st.loop.node is fn and st.inlining == (fn,) and bool(st.conds) \
            and fn not in self.index.with_loops and bool(st.loop.events(Kind.BACKWARD))

    def _partial_of(self, call: cst.Call, st: _State) -> tuple[cst.FunctionDef, list[cst.Arg]] | None:
        """``backwards = partial(loss_backwards, self.fp16)`` bound before the loop, then
        ``backwards(loss, opt)``: the same-file function and the arguments the partial fixes."""
        if type(call.func) is not cst.Name or len(st.inlining) >= _MAX_INLINE_DEPTH or not st.loop.is_loop:
            return None
        outer: Loop | None = st.loop
        while outer is not None:
            found = [a for a in outer.assignments if a.names == (call.func.value,) and a.op == "="]
            if found:
                value = found[-1].value
                if not (isinstance(value, cst.Call) and last_part(func_name(value) or "") == "partial"
                        and value.args and isinstance(value.args[0].value, cst.Name)):
                    return None
                candidates = [f for f in self.index.functions.get(value.args[0].value.value, [])
                              if f not in st.inlining]
                if len(candidates) != 1 or candidates[0] not in self.index.eventful:
                    return None
                return candidates[0], list(value.args[1:])
            outer = outer.parent
        return None

    def _inline(self, fn: cst.FunctionDef, call: cst.Call, stmt: cst.CSTNode, st: _State,
                fixed: Sequence[cst.Arg] = ()) -> None:
        self.inlined.add(fn)
        params = [p for p in fn.params.params if p.name.value != "self"]
        bound: dict[str, cst.BaseExpression] = {}
        args = [*fixed, *call.args]
        for param, arg in zip(params, [a.value for a in args if a.keyword is None and not a.star]):
            bound[param.name.value] = arg
        for arg in args:
            if arg.keyword is not None:
                bound[arg.keyword.value] = arg.value
        first = len(st.loop.assignments)
        order = self._next()
        for param in [*fn.params.params, *fn.params.kwonly_params]:
            name = param.name.value
            value = bound.get(name, param.default)
            if value is not None and dotted(value) != name:  # `fn(step=step)` binds nothing new
                # Bind parameters like assignments: guards on them resolve to the caller's values.
                st.loop.assignments.append(Assignment((name,), value, "=", call, st.conds, order))
        # `@torch.no_grad()` on the helper: what it computes carries no graph, as under `with torch.no_grad():`
        contexts = st.contexts + tuple(Context("no_grad", d.decorator) for d in fn.decorators
                                       if last_part((func_name(d.decorator) if isinstance(d.decorator, cst.Call)
                                                     else dotted(d.decorator)) or "") in ("no_grad", "inference_mode"))
        self._block(lines(fn.body), replace(st, inlining=st.inlining + (fn,), site=st.site or (call, stmt),
                                             contexts=contexts), fn)
        if not any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in walk(fn.body)):
            span = (order, self._next())
            for assignment in st.loop.assignments[first:]:
                if assignment.scope is None and assignment.names and all("." not in n for n in assignment.names):
                    assignment.scope = span


def _steps_on_parameter(fn: cst.FunctionDef, params: set[str]) -> bool:
    """Whether ``fn`` steps an optimizer under a test that reads one of ``params`` (``if
    apply_gradient: self.optimizer_g.step()``): the caller decides which calls step. A method that
    steps on a counter of its object (``if self.n_iter % N == 0:``) is read on its own instead."""
    for node in walk(fn.body):
        if type(node) is cst.If and names_in(node.test) & params and any(
                type(c) is cst.Call and type(c.func) is cst.Attribute and c.func.attr.value == "step"
                for branch in (node.body, node.orelse) if branch is not None for c in walk(branch)):
            return True
    return False


def _is_framework_backward(recv: str, role: Role, first: cst.BaseExpression) -> bool:
    """``engine.backward(loss)``: a backward some object runs for the loss it is handed (an engine, an
    accelerator, an optimizer's own such as apex's ``FP16_Optimizer``), known by the object's role
    whatever the names, else by the names."""
    if role in (Role.ACCELERATOR, Role.ENGINE, Role.OPTIMIZER):
        return True
    short = last_part(recv)
    if short in _ENGINE_RECEIVERS or short == "fabric":
        return True
    loss_text = (dotted(first) or "").lower()
    return "loss" in loss_text and "loss" not in short.lower()


def _averages_a_number(args: list[cst.BaseExpression]) -> bool:
    """Whether an EMA's ``update`` averages a number, not weights: ``lecam_ema.update(d_out.mean().item(),
    "D_real", step)`` (a loss statistic, a new value on every micro-batch) takes a scalar first or a
    key naming which average to update; a weight EMA takes the model (``ema.update(model)``)."""
    if not args:
        return False
    first = args[0]
    if isinstance(first, (cst.Integer, cst.Float)):
        return True
    if isinstance(first, cst.Call):
        called = method(first)
        if (called is not None and called[1] == "item") or func_name(first) in ("float", "int"):
            return True
    return any(isinstance(a, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) for a in args)


def _is_loss_scaler_call(call: cst.Call) -> bool:
    """``loss_scaler(loss, optimizer, ...)`` as timm, MAE and DeiT call their NativeScaler: a loss and
    an optimizer, plus the helper's own keywords or a loss-named first argument (not any function
    whose name mentions a scaler, such as ``custom_scaler(roles, name)``)."""
    args = positional(call)
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if len(args) < 2:
        return False
    own_keywords = keywords & {"update_grad", "need_update", "clip_grad", "parameters", "create_graph"}
    return bool(own_keywords) or "loss" in (dotted(args[0]) or "").lower()


def _bound_no_sync(item: cst.BaseExpression, st: _State) -> Context | None:
    """``with sync_context():`` where the loop bound ``sync_context = model.no_sync if test else
    nullcontext`` before, or ``with ctx:`` after ``ctx = model.no_sync() if not do_step else
    contextlib.suppress()`` (ClassyVision's task): the conditional no_sync it picked (as
    ``model.no_sync() if test else nullcontext()`` written in the ``with``)."""
    if isinstance(item, cst.Name):
        name = item.value
    elif isinstance(item, cst.Call) and not item.args and isinstance(item.func, cst.Name):
        name = item.func.value
    else:
        return None
    bound = next((a for a in reversed(st.loop.assignments) if a.names == (name,)), None)
    if bound is None or bound.op != "=" or not isinstance(bound.value, cst.IfExp) \
            or conditional_no_sync(bound.value) is None:
        return None
    return Context("no_sync?", bound.value)


def _helper_no_sync(item: cst.BaseExpression, functions: dict[str, list[cst.FunctionDef]]) -> Context | None:
    """``with maybe_no_sync(model, is_last):`` of a helper of the file that picks ``model.no_sync()``
    or a do-nothing context: the conditional no_sync it picks, read at the call."""
    chosen = helper_no_sync(item, functions)
    return Context("no_sync?", chosen, item) if chosen is not None else None


def _apex_scaled(item: cst.WithItem) -> tuple[str, cst.BaseExpression] | None:
    """``amp.scale_loss(loss, optimizer) as scaled_loss``: ``("scaled_loss", loss)``."""
    call = item.item
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute) \
            or call.func.attr.value != "scale_loss" or not call.args or call.args[0].keyword is not None:
        return None
    target = item.asname.name if item.asname is not None else None
    return (target.value, call.args[0].value) if isinstance(target, cst.Name) else None


def _context(item: cst.BaseExpression) -> Context | None:
    expr = item.body if isinstance(item, cst.IfExp) else item
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Dict):
        # `with {"bf16": autocast(dtype=torch.bfloat16), "fp16": ...}[args.precision]:` one of the
        # listed contexts runs, chosen by the key
        if any(isinstance(e, cst.DictElement) and isinstance(e.value, cst.Call)
               and last_part(func_name(e.value) or "") == "autocast" for e in expr.value.elements):
            return Context("autocast?", item)
        return None
    if not isinstance(expr, cst.Call):
        return None
    called = method(expr)
    name = called[1] if called else last_part(func_name(expr) or "")
    kind = {"accumulate": "accumulate", "no_sync": "no_sync", "no_backward_sync": "no_sync",
            "autocast": "autocast", "no_grad": "no_grad", "inference_mode": "no_grad"}.get(name)
    if kind is None:
        return None
    return Context(kind + ("?" if isinstance(item, cst.IfExp) else ""), item)


def _grad_switch(stmt: cst.CSTNode) -> tuple[cst.Call, bool] | None:
    """``torch.set_grad_enabled(False)`` (or ``True``) written as a statement of its own: the call and
    the mode it sets."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Expr:
        return None
    call = stmt.body[0].value
    return _grad_switch_call(call)


def _grad_switch_call(call: cst.BaseExpression) -> tuple[cst.Call, bool] | None:
    if type(call) is not cst.Call or last_part(func_name(call) or "") != "set_grad_enabled" or len(call.args) != 1:
        return None
    value = call.args[0].value
    if type(value) is not cst.Name or value.value not in ("True", "False"):
        return None
    return call, value.value == "True"


def _early_exit_test(stmt: cst.CSTNode, nested: dict[cst.If, cst.BaseExpression]) -> cst.BaseExpression | None:
    """``if <test>: ... continue`` (or return/break) with no else: what follows runs only when not
    test. ``if a: ... if b: return`` (an exit that ends the body, no else at either level) exits when
    ``a and b``: ``if N != 1: if step % N != 0: return`` before a step gates it like the flat test
    (``nested``: the composed test of each such ``if``, one node however often it is inlined)."""
    if type(stmt) is not cst.If or exit_statement(stmt) is None:  # exact types: isinstance() on an ABC is slow
        return None
    if type(last_small(stmt.body)) in EXITS:  # type: ignore[attr-defined]
        return stmt.test  # type: ignore[attr-defined]
    found = nested.get(stmt)
    if found is None:
        inner = _early_exit_test(lines(stmt.body)[-1], nested)
        found = nested[stmt] = conjunction(stmt.test, inner)  # type: ignore[arg-type]
    return found


def _has_events(loop: Loop) -> bool:
    return any(isinstance(i, Event) or _has_events(i) for i in loop.items)


def _resolve_iterable(expr: cst.BaseExpression, scope: Loop) -> cst.BaseExpression:
    """Follow names bound before the loop to what they iterate: ``pbar = enumerate(train_loader)``,
    ``pbar = tqdm(pbar)``, ``for i, batch in pbar`` -> ``enumerate(train_loader)``."""
    current, limit = expr, None
    for _ in range(4):
        inner = unwrap_iterable(current)
        name = dotted(inner)
        if name is None:
            return inner if current is not expr else expr
        found = None
        outer: Loop | None = scope
        while outer is not None and found is None:
            candidates = [a for a in outer.assignments if a.names == (name,) and a.op == "="
                          and (limit is None or a.order < limit) and a.in_loop is None]
            found = max(candidates, key=lambda a: a.order) if candidates else None
            outer = outer.parent
        if found is None:
            return inner if current is not expr else expr
        current, limit = found.value, found.order
    return expr


def _bound_values(expr: cst.BaseExpression, scope: Loop, depth: int = 0) -> list[cst.BaseExpression]:
    """What the names an iterable reads were bound to before the loop (``epoch_iterator =
    tqdm(train_loader)`` for ``enumerate(epoch_iterator)``), two levels deep."""
    found: list[cst.BaseExpression] = []
    for name in names_in(expr):
        outer: Loop | None = scope
        while outer is not None:
            bound = [a for a in outer.assignments if name in a.names and a.op == "=" and a.in_loop is None]
            if bound:
                found.extend(a.value for a in bound)
                if depth < 1:
                    for assignment in bound:
                        found.extend(_bound_values(_handed_back(assignment, name), scope, depth + 1))
                break
            outer = outer.parent
    return found


def _handed_back(assignment: Assignment, name: str) -> cst.BaseExpression:
    """The argument ``name`` stands for in ``model, optimizer, loader = accelerator.prepare(model,
    optimizer, loader)``: a call given one name per target hands back what it was given, in order, so
    ``loader`` comes from the loader alone, not from the scheduler prepared beside it. Anything else:
    the whole value."""
    node, value = assignment.node, assignment.value
    if not isinstance(node, cst.Assign) or len(node.targets) != 1 or not isinstance(value, cst.Call):
        return value
    target = node.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return value
    names = [dotted(e.value) if isinstance(e, cst.Element) else None for e in target.elements]
    args = value.args
    if len(args) != len(names) or any(a.keyword is not None or a.star or dotted(a.value) is None for a in args):
        return value
    return args[names.index(name)].value if name in names else value


def _has_backward(loop: Loop) -> bool:
    return any(isinstance(i, Event) and i.kind is Kind.BACKWARD or isinstance(i, Loop) and _has_backward(i)
               for i in loop.items)


def _flatten_optimizer_loops(loop: Loop) -> None:
    """A loop over the optimizers (``for opt_idx, optimizer in enumerate(self.optimizers):`` in a
    Lightning-style ``run_training_batch``) that back-propagates and steps the optimizer it binds is
    one pass per optimizer over the same micro-batch: its events belong to the loop around it, whose
    iterations are the micro-batches the step conditions count."""
    subs = loop.loops
    for sub in subs:
        _flatten_optimizer_loops(sub)
    flat = [sub for sub in subs if _over_optimizers(sub)]
    if not flat:
        return
    items: list[Event | Loop] = []
    for item in loop.items:
        if not any(item is sub for sub in flat):
            items.append(item)
            continue
        assert isinstance(item, Loop)
        items.extend(_moved_up(loop, item))
    loop.items = items


def _over_optimizers(loop: Loop) -> bool:
    """``loop`` iterates a collection of optimizers (``self.optimizers``, ``[opt_d, opt_g]``), steps
    the one it binds and back-propagates, and holds no loop of its own."""
    node = loop.node
    if type(node) is not cst.For or not any(_OPTIMIZERS.search(last_part(n)) for n in names_in(node.iter)) \
            or loop.loops or not loop.events(Kind.BACKWARD):
        return False
    return bool(names_in(node.target) & {s.receiver for s in loop.events(Kind.STEP)})


def _flatten_chunk_loops(loop: Loop) -> None:
    """A loop that back-propagates but never steps, over something that is not the data (the chunks
    of one batch: ``for latents, noise in zip(latents_list, noise_list)``), inside a loop that neither
    back-propagates nor steps itself (``for batch in batch_list:`` with the step after it): the
    chunks are part of the outer loop's micro-batch. Its events move up into the outer loop, which
    is then the micro-step loop the step after it closes."""
    for sub in loop.loops:
        _flatten_chunk_loops(sub)
    if not loop.is_loop or any(isinstance(i, Event) and i.kind in (Kind.BACKWARD, Kind.STEP) for i in loop.items):
        return
    inner = [sub for sub in loop.loops if _has_backward(sub)]
    if len(inner) != 1 or inner[0].events(Kind.STEP, deep=True) or inner[0].loops or _is_data(inner[0]):
        return
    chunk = inner[0]
    items: list[Event | Loop] = []
    for item in loop.items:
        if item is not chunk:
            items.append(item)
            continue
        items.extend(_moved_up(loop, chunk))
    loop.items = items


def _moved_up(loop: Loop, inner: Loop) -> list[Event | Loop]:
    """The items of ``inner``, a loop of ``loop``, made items of ``loop`` under ``inner``'s
    conditions, with its assignments and opaque calls."""
    moved: list[Event | Loop] = []
    for sub in inner.items:
        sub.conds = inner.conds + sub.conds
        if isinstance(sub, Event):
            sub.loop = loop
        else:
            sub.parent = loop
        moved.append(sub)
    for assignment in inner.assignments:
        assignment.conds = inner.conds + assignment.conds
        loop.assignments.append(assignment)
    _adopt_opaque(loop, inner)
    return moved


def _opaque(loop: Loop, call: cst.Call, conds: tuple[Cond, ...]) -> None:
    """Keep ``call`` as one the model cannot see into, with the conditions it runs under."""
    loop.opaque_calls.append(call)
    loop.opaque_conds[id(call)] = conds


def _adopt_opaque(loop: Loop, inner: Loop) -> None:
    """The opaque calls of a loop whose items move up into ``loop``, under the inner loop's conditions."""
    for call in inner.opaque_calls:
        loop.opaque_calls.append(call)
        loop.opaque_conds[id(call)] = inner.conds + inner.opaque_conds.get(id(call), ())


def _is_data(loop: Loop) -> bool:
    return is_data_loop(loop)


def _lift_loops_without_backward(loop: Loop) -> None:
    """Loops that run no backward (``for p in params``, ``for opt in optimizers``, an eval loop) are
    part of their parent's iteration: move their events up, under the loop's own conditions."""
    items: list[Event | Loop] = []
    for item in loop.items:
        if isinstance(item, Loop):
            _lift_loops_without_backward(item)
            if not _has_backward(item):
                for sub in item.items:
                    sub.conds = item.conds + sub.conds
                    if isinstance(sub, Event):
                        sub.loop = loop
                        sub.lifted = (item, *sub.lifted)
                    else:
                        sub.parent = loop
                    items.append(sub)
                for assignment in item.assignments:
                    assignment.conds = item.conds + assignment.conds
                    assignment.in_loop = assignment.in_loop or item.node
                    assignment.lifted = (item, *assignment.lifted)
                    loop.assignments.append(assignment)
                _adopt_opaque(loop, item)
                continue
        items.append(item)
    loop.items = items


def _clears(value: cst.BaseExpression) -> bool:
    """What assigned to ``p.grad`` clears it: ``None``, or a tensor of zeros (``torch.zeros_like(p)``,
    ``Variable(p.grad.data.new().resize_as_(p.grad.data).zero_())``)."""
    if isinstance(value, cst.Name):
        return value.value == "None"
    if not isinstance(value, cst.Call):
        return False
    name = last_part(func_name(value) or "")
    if name == "Variable" and value.args:
        return _clears(value.args[0].value)
    if name in ("zeros_like", "zeros"):
        return True
    called = method(value)
    return called is not None and called[1] == "zero_"


def _calls_method(fn: cst.FunctionDef, name: str) -> bool:
    """``fn``'s own code calls ``x.<name>(...)``."""
    return any(type(n) is cst.Call and type(n.func) is cst.Attribute  # exact types: isinstance() on an ABC is slow
               and n.func.attr.value == name for n in walk(fn.body))  # type: ignore[attr-defined]


def _abstract(fn: cst.FunctionDef) -> bool:
    """A method that only says a subclass defines it: a docstring, ``pass``, ``...`` or ``raise
    NotImplementedError``."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [fn.body]
    for stmt in body:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
        for small in smalls:
            if type(small) is cst.Pass or type(small) is cst.Expr and type(small.value) in (
                    cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis):
                continue
            exc = small.exc if type(small) is cst.Raise else None
            if exc is not None and (func_name(exc) if type(exc) is cst.Call else dotted(exc)) == "NotImplementedError":
                continue
            return False
    return True
