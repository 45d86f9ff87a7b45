"""Project-wide facts: what the names a file imports from its own project do.

``for_file(path)`` reads (with the stdlib ``ast``, cached) the project modules the file imports,
the entry scripts that import it (or subclass one of its classes) and build a DDP wrapper, and,
where the file's text steps a scheduler it is handed, the callers that hand it one
(``loopcheck.project.callers``). The model builder asks ``events(call)``
at each call: an imported wrapper that back-propagates, steps, zeroes or leaves a model in eval
mode becomes those events at the call site, so the rules see them and the finding points at the
loop; ``where(node)`` names the other file and line for the message. ``digest()`` changes when
any of these facts changes, which invalidates the file's cached result.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern
from loopcheck.project.environments import environment_constructor, environment_name
from loopcheck.project.facts import FunctionFacts, ModuleFacts, ast_dotted
from loopcheck.project.walk import parsed
from loopcheck.project import callers as _callers
from loopcheck.project import ddp_helpers as _ddp_helpers
from loopcheck.project import index as _index
from loopcheck.project.index import ProjectIndex, find_root, project_index, real_path
from loopcheck.project import launches as _launches
from loopcheck.project import pins as _pins
from loopcheck.project import unset_keywords as _unset_keywords

if TYPE_CHECKING:
    import ast

    import libcst as cst

    from loopcheck.model.events import Cond, Kind
    from loopcheck.model.roles import Roles

__all__ = ["Imported", "Summary", "for_file", "forget", "merge", "new_facts", "save"]


_OPEN: dict[tuple[Path, Path | None], ProjectIndex] = {}
_SETTINGS = "+settings:"  # in a digest: the result asked ``inert_setting``  # the indexes read in this run, to save


@dataclass(frozen=True)
class Summary:
    """An imported function (or method) and where it is defined."""

    facts: FunctionFacts
    name: str
    path: str  # relative to the project root

    @property
    def where(self) -> str:
        return f"{self.path}:{self.facts.line}"


@dataclass
class Imported:
    """The project facts one checked file can use."""

    path: Path
    index: ProjectIndex
    own: ModuleFacts
    _tree: ast.Module | None = None  # the file's ``ast``, if parsed (for ``ddp_importers``)
    _ddp_importers: list[str] | None = None
    _helpers_called: list[tuple[str, str]] | None = None
    _passed: dict[tuple[str, str], _callers.Passed | None] | None = None
    _project_files_read: bool = False  # ``inert_setting`` or ``imported_elsewhere`` was asked (their files join the digest)
    _base_wraps: dict[str, str | None] = field(default_factory=dict)
    _trainer_bases: dict[str, bool] = field(default_factory=dict)  # base class -> inherits_trainer_step
    _modules: dict[str, ModuleFacts | None] = field(default_factory=dict)
    _where: dict[int, str] = field(default_factory=dict)
    _class_defs: dict[str, cst.ClassDef | None] = field(default_factory=dict)
    # (method's path:line, its `if` number, id(call)) -> that test parsed; id(node) -> (node, call) for them
    _gate_nodes: dict[tuple[str, int, int], cst.If] = field(default_factory=dict)
    _stand_ins: dict[int, tuple[cst.CSTNode, cst.Call]] = field(default_factory=dict)
    _methods: dict[tuple[str, str, bool], Summary | None] = field(default_factory=dict)
    # id(call), id(roles) -> (call, roles, summary): the builder, the rules and the memory model ask
    # about the same calls, and most calls name nothing of the project (the call and roles are kept
    # so that an id is never reused while its entry lives)
    _summaries: dict[tuple[int, int], tuple[cst.Call, Roles | None, Summary | None]] = field(default_factory=dict)
    # (dotted name, attribute, id(roles)) -> (roles, summary): calls of one name run the same callee
    _by_name: dict[tuple[str | None, str | None, int], tuple[Roles | None, Summary | None]] = field(
        default_factory=dict)

    @property
    def ddp_handed(self) -> list[str]:
        """``path:line`` of each call of a project helper that returns DDP modules, in a file that
        hands them to this file's functions or classes (``Gen, Dis = prepare_parallel(...)`` ...
        ``WORKER(Gen=Gen, Dis=Dis)``): read only when a rule asks (the cache key holds the texts it
        depends on, ``ddp_helpers.stamps``)."""
        return [where for where, target in _ddp_helpers.handed(self.index)
                if _index.real_path(target) == self.path and not where.startswith(f"{self.own.path}:")]

    @property
    def ddp_helpers_called(self) -> list[tuple[str, str]]:
        """(name, ``path:line``) of each project helper that returns a DDP wrapper it builds, in
        another module, whose name this file's text calls (``self.adapter.model_to_ddp(...)``)."""
        if self._helpers_called is None:
            self._helpers_called = _ddp_helpers.called_by(self.index, self.path)
        return self._helpers_called

    @property
    def ddp_importers(self) -> list[str]:
        """``path:line`` of each entry script that imports this file, calls into it and builds a DDP
        wrapper, or hands one to a method of this file. Read when first asked: finding them scans
        every file of the project for DDP wraps, which only some rules and the cache digest need."""
        if self._ddp_importers is None:
            self._ddp_importers = _ddp_importers(self)
        return self._ddp_importers

    @property
    def passed_schedulers(self) -> dict[tuple[str, str], _callers.Passed | None]:
        """(function or class, the scheduler as its loop names it) -> the schedulers the project's
        callers pass it, for each top-level function of this file whose text steps a parameter named
        for a scheduler, and each class that keeps one its ``__init__`` is given and steps it
        (``loopcheck.project.callers``); read when first asked, from the text first."""
        if self._passed is None:
            self._passed = {(callee, stepped): _callers.passed(self.index, self.path, callee, param, position)
                            for callee, stepped, param, position in
                            _callers.stepped_parameters(self.index.text_of(self.path))}
        return self._passed

    # -- lookups ---------------------------------------------------------------------------
    def summary(self, call: cst.Call, roles: Roles | None = None) -> Summary | None:
        """The imported function or method ``call`` runs, if a project module defines it."""
        key = (id(call), id(roles))
        known = self._summaries.get(key)
        if known is None or known[0] is not call or known[1] is not roles:
            known = self._summaries[key] = (call, roles, self._summary(call, roles))
        return known[2]

    def _summary(self, call: cst.Call, roles: Roles | None) -> Summary | None:
        """``summary`` of a call not asked about before: that of the first call of the same name (a
        loop calls `optimizer.step()` and `print()` in many places; the roles are complete by then)."""
        cst, syntax = _libcst()
        func = call.func
        name = syntax.dotted(func)
        attr = func.attr.value if type(func) is cst.Attribute else None  # type: ignore[attr-defined]
        key = (name, attr, id(roles))
        known = self._by_name.get(key)
        if known is None or known[0] is not roles:
            known = self._by_name[key] = (roles, self._lookup(name, attr, roles))
        return known[1]

    def _lookup(self, name: str | None, attr: str | None, roles: Roles | None) -> Summary | None:
        """The summary of a call of ``name`` (the dotted name called, if it is one) whose callee is
        an attribute ``attr`` (None: not an attribute)."""
        syntax = _libcst()[1]
        last_part, func_name = syntax.last_part, syntax.func_name
        imports = self.own.imports
        if name is not None and "." not in name:
            return self._function(name) if name in imports else None
        if name is not None and name.count(".") == 1 and name.split(".", 1)[0] in imports:
            module, function = name.split(".")  # `misc.ddp_sync(...)`: a module imported whole
            found = self._module_of(module, function)
            if found is not None and function in found.functions:
                return Summary(found.functions[function], function, found.path)
        if roles is not None and attr is not None:
            receiver = name.rsplit(".", 1)[0] if name is not None else None  # what `attr` is read from
            for constructor in roles.constructed.get(last_part(receiver or ""), []):
                constructor_name = func_name(constructor) or ""
                if constructor_name.split(".", 1)[0] not in imports or last_part(constructor_name) == "Accelerator":
                    # built from a class of this file or of a library; Accelerate's own repository
                    # defines `Accelerator`, whose API loopcheck.model.accelerate reads by its meaning
                    continue
                found = self._method(constructor_name, attr)
                if found is not None:
                    return found
        if roles is not None and name is not None:
            # `self.loss_fn(out, y)`: calling an object built by an imported class (or factory) runs
            # its `__call__` (a module's `forward`)
            for constructor in roles.constructed.get(last_part(name), []):
                constructor_name = func_name(constructor) or ""
                if constructor_name.split(".", 1)[0] in imports and "." not in constructor_name:
                    for method in ("__call__", "forward"):
                        found = self._method(constructor_name, method)
                        if found is not None:
                            return found
        return None

    def dotted_summary(self, call: cst.Call) -> Summary | None:
        """The function ``pkg.module.fn(...)`` runs, of a module imported whole by its dotted name
        (``import src.util`` ... ``src.util.set_optim(opt, model)``); None for any other call."""
        name = _libcst()[1].dotted(call.func)
        if name is None or name.count(".") < 2 or name.split(".", 1)[0] not in self.own.imports:
            return None
        local, rest = name.split(".", 1)
        module, attr, level = self.own.imports[local]
        if attr or module != local:
            return None  # `from x import src` or `import a.b as src`: not the package by its own name
        dotted_name, function = rest.rsplit(".", 1)
        key = f"dotted:{name}"
        if key not in self._modules:
            path = self.index.resolve(self.path, f"{module}.{dotted_name}", level)
            self._modules[key] = self.index.facts(path, names=[function]) \
                if path is not None and self.index.may_define(path, function) else None
        found = self._modules[key]
        if found is None or function not in found.functions:
            return None
        return Summary(found.functions[function], function, found.path)

    def defines(self, call: cst.Call) -> bool:
        """Whether a project module defines the function ``call`` calls (``fn(...)`` imported from it,
        or ``module.fn(...)``), so that ``events`` gives all it does to what it is handed."""
        name = _libcst()[1].dotted(call.func)
        if name is None or name.count(".") > 1:
            return False
        if "." not in name:
            return name in self.own.imports and self._from_module(name) is not None
        module, function = name.split(".")
        return module in self.own.imports and self._module_of(module, function) is not None

    def returned_numbers(self, call: cst.Call, roles: Roles) -> tuple[int, ...]:
        """The elements of the tuple ``call`` returns that are plain numbers, where it calls a model
        built by a class of a project module (``model = Model(...)``, ``model(ids)`` runs its
        ``forward``); ``summary`` reads a plain name as an imported function only."""
        syntax = _libcst()[1]
        name = syntax.dotted(call.func)
        if name is None:
            return ()
        for constructor in roles.constructed.get(syntax.last_part(name), []):
            constructor_name = syntax.func_name(constructor) or ""
            if constructor_name.split(".", 1)[0] in self.own.imports and "." not in constructor_name:
                found = self._method(constructor_name, "forward")
                if found is not None:
                    return found.facts.numbers
        return ()

    def events(self, call: cst.Call, roles: Roles) -> list[tuple[Kind, str | None, dict[str, object]]]:
        """The training events an imported wrapper stands for at ``call``, in the order such helpers
        use: zeroing before a backward (or after a step), backward, steps, eval mode (the order
        inside the wrapper is not modelled)."""
        found = self.summary(call, roles)
        if found is None:
            return []
        from loopcheck.model.events import Framework, Kind
        from loopcheck.model.roles import Role
        from loopcheck.model.syntax import method, receiver, source

        facts = found.facts
        args = arguments(call, facts)
        specs: list[tuple[Kind, str | None, dict[str, object]]] = []
        zero = (Kind.ZERO_GRAD, source(call.func), {"target": "param"})
        if facts.zeroes and not facts.steps:
            specs.append(zero)  # a forward-backward helper clears before it back-propagates
        if facts.backward is not None and facts.backward in args:
            specs.append((Kind.BACKWARD, source(call.func), {"loss": args[facts.backward],
                                                              "framework": Framework.TORCH}))
        called = method(call)
        if facts.clips and (called is None or not _CLASSIFIED.search(called[1])):
            # a helper that clips (`clip_gradient(optimizer, c)`), or back-propagates, clips and steps,
            # clips before it steps; an optimizer's own `step()` that clips (BertAdam) stays a step
            specs.append((Kind.CLIP, source(call.func), {"target": "param"}))
        # `if scaler is not None: scaler.step(optimizer) ... else: optimizer.step()` (open_clip's
        # `backward(args, loss, scaler, optimizer, model)`): where the call hands a scaler, its step is the
        # one that runs; the plain step is the other branch, not a second step
        through_scaler = {position for scaler, position, _ in facts.scaler_steps
                          if position in args and _scaler_name(call, scaler, args) not in (None, "None")}
        for position in facts.steps:
            if position in args and position not in through_scaler:
                optimizer = receiver(args[position])
                if not _stepped_as_other(optimizer, roles):
                    specs.append((Kind.STEP, optimizer, {"optimizer": optimizer}))
        for scaler, position, updates in facts.scaler_steps:
            name = _scaler_name(call, scaler, args)
            if name in (None, "None") or position not in args:
                continue  # a scaler argument left out is its default (None), or passed as None
            optimizer = receiver(args[position])
            if updates or isinstance(scaler, int) or scaler == "self":  # (a scaler's own method: a scaler's step)
                specs.append((Kind.STEP, optimizer, {"optimizer": optimizer, "scaler": name}))
                if updates:
                    specs.append((Kind.SCALER_UPDATE, name, {}))
            else:  # the wrapper's own scaler, not updated there: the wrapper owns its update, as a loss scaler does
                specs.append((Kind.STEP, optimizer, {"optimizer": optimizer, "scaler": name,
                                                     "framework": Framework.LOSS_SCALER}))
        if facts.zeroes and (facts.steps or facts.scaler_steps):
            specs.append(zero)  # a helper that steps clears after the step
        specs += _evals(facts, args)
        # an epoch function of another module that starts with `model.train()`: the mode switch comes
        # before its backward and steps
        specs[:0] = [(Kind.TRAIN_MODE, receiver(args[p]), {}) for p in facts.trains if p in args]
        if not specs and called is not None and (not _CLASSIFIED.search(called[1]) or called[1] == "update"
                                                 and roles.of(receiver(called[0])) is Role.UNKNOWN):
            # `keep_avg.update_value("loss", loss)`, `losses.update(loss, n)` (an AverageMeter of the
            # project, not a scaler or an EMA): the object keeps what is handed in, across calls
            for position in facts.keeps:
                if position in args:
                    specs.append((Kind.STORE, source(called[0]), {"value": args[position]}))
        if specs:
            self._where[id(call)] = found.where
        return specs

    def base_events(self, call: cst.Call, roles: Roles, base: str
                    ) -> list[tuple[Kind, str | None, dict[str, object]]] | None:
        """The training events of ``self.method(...)`` where the file defines no ``method`` and its
        class's first base ``base`` is a class of another project module that does (``class
        Trainer(BaseTrainer)`` calling ``self.optimizer_step()``): what that method does to the
        object's optimizers on every call, in order. None: the method may do more than its facts
        say (an effect under a test, a zeroing of parameters): the caller treats the call as one it
        cannot see into. An empty list: no such method, or one without effect."""
        from loopcheck.model.events import Framework, Kind
        from loopcheck.model.roles import Role
        from loopcheck.model.syntax import positional

        func = call.func
        cst = _libcst()[0]
        if not isinstance(func, cst.Attribute) or base.split(".", 1)[0] not in self.own.imports:
            return []
        found = self._method(base, func.attr.value, base=True)
        if found is not None and found.facts.evals and not (found.facts.own or found.facts.own_partial):
            # `self._test_classification(model)` of a base class that leaves the model it is handed in eval mode
            evals = _evals(found.facts, arguments(call, found.facts))
            if evals:
                self._where[id(call)] = found.where
            return evals
        if found is None or not (found.facts.own or found.facts.own_partial):
            return []
        if found.facts.own_partial and not found.facts.gated:
            return None
        effects = found.facts.gated or tuple((*effect, ()) for effect in found.facts.own)
        args = positional(call) if not any(a.star for a in call.args) else None
        specs: list[tuple[Kind, str | None, dict[str, object]]] = []
        for kind, what, scaler, gates in effects:
            if kind == "zero":
                target = "optimizer" if roles.of(what) in (Role.OPTIMIZER, Role.ENGINE) or _optimizer_named(what) \
                    else "model"
                specs.append((Kind.ZERO_GRAD, what, {"target": target}))
            elif kind == "step":
                specs.append((Kind.STEP, what, {"optimizer": what, **({"scaler": scaler} if scaler else {})}))
            elif kind == "update":
                specs.append((Kind.SCALER_UPDATE, what, {}))
            else:
                loss = args[int(what)] if args is not None and int(what) < len(args) else None
                if loss is None:
                    return None  # handed by keyword or not at all: the loss is not read here
                specs.append((Kind.BACKWARD, None, {"loss": loss, "framework": Framework.TORCH,
                                                    **({"scaler": scaler} if scaler else {})}))
            if gates:  # the builder adds them to the call's own conditions
                conds = self._gates(found.where, gates, call)
                if conds is None:
                    return None
                specs[-1][2]["conds"] = conds
        if specs:
            self._where[id(call)] = found.where
        return specs

    def _gates(self, where: str, gates: tuple[tuple[str, bool, int, str], ...], call: cst.Call
               ) -> tuple[Cond, ...] | None:
        """The conditions a base method's effect runs under (``FunctionFacts.gated``), as the builder
        keeps them: one ``if`` node per test of the method, parsed from its text. Those nodes are not
        in the checked file: a finding at one of them points at ``call`` (``stand_in``). None where
        libcst cannot parse a test that ``ast`` wrote (the call is then one the caller cannot see into)."""
        from loopcheck.model.events import Cond

        cst = _libcst()[0]
        conds = []
        for test, negated, number, branch in gates:
            key = (where, number, id(call))
            node = self._gate_nodes.get(key)
            if node is None:
                body = "return" if branch == "after-exit" else "pass"
                try:
                    node = cst.parse_statement(f"if {test}:\n    {body}\n")
                except Exception:  # noqa: BLE001  (syntax newer than libcst's parser)
                    return None
                self._gate_nodes[key] = node
                for sub in _libcst()[1].walk(node):
                    self._stand_ins[id(sub)] = (sub, call)
            conds.append(Cond(node.test, negated, node, branch))
        return tuple(conds)

    def stand_in(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The call of the checked file a node of a base method's parsed test stands for, else None."""
        found = self._stand_ins.get(id(node))
        return found[1] if found is not None and found[0] is node else None

    def class_bases(self, constructor: str) -> str | None:
        """The bases, as written, of the class a project module defines that ``constructor`` names
        (``Cls`` imported from it, or ``module.Cls`` of a module imported whole); None where no
        project module is seen to define it."""
        found = self._class_module(constructor)
        return self.index.class_bases(*found) if found is not None else None

    def _class_module(self, constructor: str) -> tuple[Path, str] | None:
        """The project module and class name that ``constructor`` (``Cls``, ``module.Cls``) names."""
        local, _, name = constructor.rpartition(".")
        imported = self.own.imports.get(local or name)
        if imported is None or "." in local:
            return None
        module, attr, level = imported
        if local:  # `import lr_schedule` / `from pkg import lr_schedule`: the class is `name` of that module
            path = self.index.resolve(self.path, f"{module}.{attr}" if attr and module else (attr or module), level)
        else:
            name = attr
            path = self.index.resolve(self.path, module, level) if attr else None
        return (path, name) if path is not None and name else None

    def class_def(self, constructor: str) -> cst.ClassDef | None:
        """The top-level class a project module defines that ``constructor`` names, parsed (libcst) when
        first asked; None where no project module is seen to define it."""
        if constructor not in self._class_defs:
            found = self._class_module(constructor)
            cls = None
            if found is not None and self.index.may_define(*found):
                libcst, _ = _libcst()
                try:
                    module = libcst.parse_module(self.index.text_of(found[0]).decode("utf-8-sig", "replace"))
                except Exception:  # noqa: BLE001  (a module libcst cannot parse defines nothing we read)
                    module = None
                cls = next((n for n in module.body if isinstance(n, libcst.ClassDef) and n.name.value == found[1]),
                           None) if module is not None else None
            self._class_defs[constructor] = cls
        return self._class_defs[constructor]

    def inherits_trainer_step(self, base: str) -> bool:
        """The class ``base`` (``BaseTrainer``, ``trainers.BaseTrainer``) of another project module derives
        from ``transformers.Trainer`` (directly or through classes of its module) and neither it nor
        those classes define ``training_step`` or ``_training_step`` (``loopcheck.model.inherited``)."""
        if base not in self._trainer_bases:
            self._trainer_bases[base] = self._inherits_trainer_step(base)
        return self._trainer_bases[base]

    def _inherits_trainer_step(self, base: str) -> bool:
        import ast

        from loopcheck.model.inherited import STEP_METHODS, inherits, trainer_names

        local, _, name = base.rpartition(".")
        imported = self.own.imports.get(local or name)
        if imported is None or "." in local:
            return False
        module, attr, level = imported
        if local:
            path = self.index.resolve(self.path, f"{module}.{attr}" if attr and module else (attr or module), level)
        else:
            name = attr
            path = self.index.resolve(self.path, module, level) if attr else None
        if path is None or not name or not self.index.may_define(path, name):
            return False
        text = self.index.text_of(path)
        if b"transformers" not in text:
            return False
        tree = parsed(text)
        if tree is None:
            return False
        imports: list[tuple[str | None, str, str | None]] = []
        classes = {}
        for node in tree.body:
            if isinstance(node, ast.Import):
                imports += [(None, a.name, a.asname) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imports += [(node.module, a.name, a.asname) for a in node.names]
            elif isinstance(node, ast.ClassDef):
                bases = [ast_dotted(b) for b in node.bases]
                defines = any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name in STEP_METHODS
                              or isinstance(m, ast.Assign) and any(isinstance(t, ast.Name) and t.id in STEP_METHODS
                                                                   for t in m.targets) for m in node.body)
                classes[node.name] = (bases if not node.keywords else [None], defines)
        return inherits(name, classes, trainer_names(imports))

    def base_ddp_wrap(self, base: str) -> str | None:
        """``path:line`` where the class ``base`` (``BaseTrainer``, ``engine.BaseTrainer``), defined
        in another project module, builds a DDP wrapper in its own body, where that module touches
        no gradient sync (a subclass of this file trains what the base wrapped); None otherwise."""
        if base not in self._base_wraps:  # several classes of a file share a base
            self._base_wraps[base] = self._base_ddp_wrap(base)
        return self._base_wraps[base]

    def _base_ddp_wrap(self, base: str) -> str | None:
        local, _, rest = base.partition(".")
        imported = self.own.imports.get(local)
        if imported is None or "." in rest:
            return None
        module, attr, level = imported
        if rest:  # `engine.BaseTrainer`: a module imported whole
            path = self.index.resolve(self.path, f"{module}.{attr}" if module and attr else attr or module, level)
            cls = rest
        else:
            path, cls = (self.index.resolve(self.path, module, level), attr) if attr else (None, "")
        if path is None or not self.index.may_define(path, cls):
            return None
        text = self.index.text_of(path)
        if not (b"DDP" in text or b"DistributedDataParallel" in text) or any(
                word.encode() in text for word in _SYNC_WORDS):
            return None
        facts = self.index.facts(path, functions=False)
        span = _class_span(text, cls)
        lines = [line for line in facts.ddp_lines if span[0] <= line < span[1]] if facts is not None and span else []
        return f"{facts.path}:{lines[0]}" if lines and facts is not None else None

    def where(self, node: cst.CSTNode) -> str | None:
        """``path:line`` of the imported definition behind events made at ``node``."""
        return self._where.get(id(node))

    def calls(self, calls: list[cst.Call], roles: Roles | None = None) -> Iterator[tuple[cst.Call, Summary]]:
        for call in calls:
            found = self.summary(call, roles)
            if found is not None:
                yield call, found

    def backward_names(self, among: Collection[str] | None = None) -> frozenset[str]:
        """The names under which this file can call an imported function or method that back-propagates
        (``train_step``, ``misc.train_step``, ``trainer.optimize``): ``loopcheck.screen`` counts a loop
        that calls one as a training loop. ``among``: only these names are looked up (those the file
        calls), and only their functions are read."""
        names: set[str] = set()
        for local in self.own.imports if among is None else [n for n in self.own.imports if n in among]:
            found = self._function(local)
            if found is not None and found.facts.backward is not None:
                names.add(local)
        for path in dict.fromkeys(self._import_paths()):
            # a module whose text never says "backward" has no function that back-propagates
            if not self.index.mentions(path, "backward"):
                continue
            if among is None:
                module = self.index.facts(path)
            else:  # a top-level function of that name, or a method of any class
                defined = sorted(n for n in among if self.index.may_define(path, n))
                module = self.index.facts(path, names=[*defined, *(f"*.{n}" for n in defined)]) if defined else None
            if module is not None:
                found_names = {n for n, f in module.functions.items() if f.backward is not None}
                found_names |= {n for ms in module.classes.values() for n, f in ms.items() if f.backward is not None}
                names |= found_names if among is None else found_names & set(among)
        return frozenset(names)

    def backward_name_candidates(self) -> frozenset[str]:
        """A superset of ``backward_names()`` read from the modules' texts alone, without parsing
        them: the local names of functions imported from a module that says ``backward``, and
        every name a ``def`` of such a module defines."""
        names: set[str] = set()
        for local, (module, attr, level) in self.own.imports.items():
            path = self.index.resolve(self.path, module, level) if attr else None
            if path is not None and self.index.mentions(path, "backward") and self.index.may_define(path, attr):
                names.add(local)
        for path in dict.fromkeys(self._import_paths()):
            if self.index.mentions(path, "backward"):
                names |= self.index.defined(path)
        return frozenset(names)

    @property
    def pins(self) -> _pins.Pins:
        """The dependency versions the project pins for this file (``loopcheck.project.pins``): a
        sub-project's own pin files, between the file and the root, decide the packages they name."""
        return _pins.pins_for(self.path, self.index.root)

    @property
    def single_process_launches(self) -> bool:
        """Whether the project documents launches of this script and all of them run one process
        (``python train.py``; ``loopcheck.project.launches``): an Accelerate-prepared model is then
        no DistributedDataParallel. Read only for a file that imports Accelerate."""
        return self._uses_accelerate() and _launches.single_process(self.path, self.index.root)

    @property
    def counts_to_an_attribute(self) -> bool:
        """Whether this file's text takes a modulus that is an attribute (``iteration %
        cfg.grad_accum_iters``) or a parameter with an inert default (``% acc_steps`` in ``def fit(...,
        acc_steps=1)``): only then does ``unset_setting`` read the project (from the file's cached
        outline: a warm run does not read its text again)."""
        return self.own.counts_to_attribute

    def unset_setting(self, name: str) -> bool:
        """Whether the setting ``name`` (``cfg.grad_accum_iters``'s last name) is only a builder
        keyword's inert default that no caller of the project sets (``loopcheck.project.unset_keywords``),
        in a file that counts to such an attribute."""
        return self.counts_to_an_attribute and _unset_keywords.inert_default(self.index, name, self.path) is not None

    def _unset_stamp(self) -> str:
        """What ``unset_setting`` depends on: every Python file of the project."""
        return self.index.python_stamp() if self.counts_to_an_attribute else ""

    def _launch_stamps(self) -> list[str]:
        return _launches.stamps(self.path, self.index.root) if self._uses_accelerate() else []

    def inert_setting(self, name: str, off: bool = False, nested: bool = False) -> bool:
        """Whether the configuration key ``name`` is inert (0, 1, null; ``off``: 0, false, null) in every
        configuration, script and document the project (or this file's sub-project) ships, and no
        command-line option sets it (``loopcheck.project.inert_settings``): an accumulation finding that
        holds only when it is above 1, or code that runs only when a switch is on, describes something
        the project never runs. The files read then join ``digest``."""
        from loopcheck.project import inert_settings  # (imported by the few files that ask)

        self._project_files_read = True
        return inert_settings.inert(self.index, name, self.path, off, nested)

    def inert_in_folder(self, module: str, name: str) -> bool:
        """Whether ``module.name``, a setting of a module of this file's own folder, is inert for this
        file (``loopcheck.project.inert_settings.inert_in_folder``); the files read join ``digest``."""
        from loopcheck.project import inert_settings

        self._project_files_read = True
        return inert_settings.inert_in_folder(self.index, self.path, module, name)

    def option_default(self, name: str) -> float | None:
        """The number the one ``add_argument`` of the project that declares the option ``name`` gives
        as its default (``loopcheck.project.option_defaults``); None where that is not one literal.
        The project's Python files then join ``digest``, as for ``inert_setting``."""
        from loopcheck.project.option_defaults import option_default  # (imported by the few files that ask)

        self._project_files_read = True
        return option_default(self.index, name)

    def named_strings(self, names: frozenset[str]) -> frozenset[str] | None:
        """The names among ``names`` that the project's Python files write as whole strings
        (``loopcheck.project.named_strings``); the project's Python files then join ``digest``."""
        from loopcheck.project.named_strings import named  # (imported by the few files that ask)

        self._project_files_read = True
        return named(self.index, names)

    def packaged(self) -> bool:
        """Whether the file lies in an installable package (a ``setup.py``, ``setup.cfg`` or
        ``pyproject.toml`` in its folder or one above it, up to the project root): its users may
        import any of its modules."""
        folder, root = self.path.parent, self.index.root
        while True:
            if any((folder / name).is_file() for name in ("setup.py", "setup.cfg", "pyproject.toml")):
                return True
            if folder == root or folder.parent == folder:
                return False
            folder = folder.parent

    def imported_elsewhere(self, named: bool = False) -> bool:
        """Whether another Python file, script, notebook or document of the project may import this
        file's module (a line that imports its name: ``from train import main``, ``import train``,
        ``from . import train``, also as a notebook cell's or a document's line; ``named``: any mention
        of the name, such as a config's ``_target_: src.models.mnist_module.Model`` that Hydra imports);
        True where that cannot be told (a root no marker names, a walk stopped early). The files read
        join ``digest`` as ``inert_setting``'s do."""
        stem = re.escape(self.path.stem.encode())
        pattern = re.compile(rb"\b" + stem + rb"\b") if named else \
            re.compile(rb"^[ \t>%!\[\"',]*(?:from[ \t]+[\w.]*\b" + stem
                       + rb"\b|(?:from[ \t]+[\w.]+[ \t]+)?import\b[^\n]*\b" + stem + rb"\b)", re.MULTILINE)
        # (a copy of the module elsewhere names itself)
        files = self._other_files(lambda path: named and path.stem == self.path.stem)
        # (a notebook too large to read may import it)
        return files is None or any(text is None or pattern.search(self._imports_of_copies_left_out(path, text))
                                    for path, text in files)

    def _imports_of_copies_left_out(self, importer: Path, text: bytes) -> bytes:
        """``text`` less the import lines of a Python file that name this module's stem but load another
        file of the project: ``from models.mae.engine import train`` in ``b/linear.py`` loads
        ``b/models/mae/engine.py``, the importer's own folder coming first, not this copy in
        ``a/models/mae/``."""
        stem = self.path.stem
        if importer.suffix != ".py" or stem.encode() not in text:
            return text
        mine = real_path(self.path)
        kept = []
        for line in text.split(b"\n"):
            found = _IMPORT_LINE.match(line) if stem.encode() in line else None
            modules = _imported_modules(found, stem) if found else []
            targets = [self.index.resolve(importer, module, level) for module, level in modules]
            if not modules or any(t is None or real_path(t) == mine for t in targets):
                kept.append(line)
        return b"\n".join(kept)

    def named_elsewhere(self, names: set[str]) -> set[str]:
        """Those of ``names`` another Python file, script, notebook or document of the project names
        (a word of its text); all of them where that cannot be told, or where a file looks one up by
        a name it builds (``getattr(train_eval, "train_eval_" + mode)``). A lookup by a configuration's
        value as it is (``getattr(trainer, cfg.name)``) takes a name that a configuration, script or
        document names, a word the texts read here hold. Read as ``imported_elsewhere``."""
        texts = self._other_texts() if names else None
        if texts is None:
            return names
        pattern = re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\b")
        lookup = re.compile(rb"getattr\([ \t]*" + re.escape(self.path.stem.encode()) + rb"\b([^\n]*)")
        found: set[str] = set()
        for text in texts:
            if text is None or any(_PLAIN_LOOKUP.match(m) is None for m in lookup.findall(text)):
                return names
            found |= {m.decode() for m in pattern.findall(text)}
        return found

    def _other_texts(self, skip: Callable[[Path], bool] = lambda path: False) -> Iterator[bytes | None] | None:
        """The texts of the project's other Python files, scripts, notebooks and documents (those
        ``skip`` leaves), read one at a time, None for one too large to read; None where they cannot be
        told (a root no marker names, a walk stopped early). What is read joins the cache digest."""
        files = self._other_files(skip)
        return None if files is None else (text for _, text in files)

    def _other_files(self, skip: Callable[[Path], bool]) -> Iterator[tuple[Path, bytes | None]] | None:
        """``_other_texts``, each with its path."""
        from loopcheck.project.index import marked_folder

        self._project_files_read = True
        if marked_folder(self.index.root) != self.index.root:
            return None
        documents = self.index.documents()
        if documents is None:
            return None
        mine = real_path(self.path)
        paths = (p for p in (*self.index.python_files(), *map(Path, documents)) if real_path(p) != mine and not skip(p))
        return ((p, text if (text := self.index.text_of(p)) or not self.index.oversized(p) else None) for p in paths)

    def with_settings(self, digest: str) -> str:
        """``digest`` (taken before the model asked), with the stamp of the files ``inert_setting``
        read where it was asked: a file's cached result then follows the project's configurations."""
        if not self._project_files_read:
            return digest
        from loopcheck.project import inert_settings

        return f"{digest}{_SETTINGS}{inert_settings.stamp(self.index)}"

    def _uses_accelerate(self) -> bool:
        return any((module or attr or "").split(".")[0] == "accelerate" and not level
                   for module, attr, level in self.own.imports.values())

    def digest(self, used: str | None = None) -> str:
        """Changes whenever a project module this file imports changes (its size or modification
        time: the facts are read only when the model asks), the entry scripts that wrap it do, the
        schedulers its callers pass it do, the project's dependency pins do (a pinned version
        changes what a library does), the documents that say how its script is launched do, or,
        where it steps on a modulus that is an attribute, any Python file of the project does;
        where ``used`` (the digest a cached result was made with) says the result asked whether a
        configuration key is inert (``with_settings``), the project's configurations too."""
        if used is not None and _SETTINGS in used:
            from loopcheck.project import inert_settings

            return f"{self.digest()}{_SETTINGS}{inert_settings.stamp(self.index)}"
        stamps = []
        # `import src.util`: LC303 reads `src.util.set_optim(...)`'s schedulers (``dotted_summary``)
        dotted = [self.index.resolve(self.path, name, 0) for name in self.own.dotted_imports]
        for path in sorted({str(p) for p in [*self._import_paths(), *dotted] if p is not None}):
            try:
                st = os.stat(path)
            except OSError:
                continue
            stamps.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
        text = "\n".join([*stamps, "<ddp importers>", *self.ddp_importers, "<ddp helpers>",
                          *_ddp_helpers.stamps(self.index, self.path), "<ddp helpers called>",
                          *(f"{name} {where}" for name, where in self.ddp_helpers_called), "<pins>", repr(self.pins),
                          "<launch documents>", *self._launch_stamps(), "<unset keywords>", self._unset_stamp(),
                          "<schedulers passed>", repr(sorted(self.passed_schedulers.items()))])
        return hashlib.sha256(text.encode()).hexdigest()

    # -- resolution ------------------------------------------------------------------------
    def _import_paths(self) -> list[Path]:
        """The project files this file's imports may name (a module, or a submodule imported by name)."""
        found = []
        text: bytes | None = None  # this file's, read for the first name a package may re-export
        for local, (module, attr, level) in self.own.imports.items():
            for dotted_name in ([f"{module}.{attr}" if module else attr, module] if attr else [module]):
                if dotted_name or level:
                    path = self.index.resolve(self.path, dotted_name, level)
                    if path is not None:
                        found.append(path)
                        if attr and dotted_name == module and path.name == "__init__.py":
                            text = self.index.text_of(self.path) if text is None else text
                            if f"({local}".encode() in text:  # a base class the package may re-export
                                found.append(self.index.defining(path, attr))
        return found

    def _module_of(self, local: str, name: str, read: str | None = None) -> ModuleFacts | None:
        """The facts of the project module bound to ``local`` (``import x.y as local``,
        ``from x import local`` where ``local`` is a submodule), with those of ``read`` (default:
        ``name``) read, if its text may define ``name`` (a module is parsed only when the model
        asks for a name it can define, and only that name's functions are read)."""
        read = read or name
        key = f"module:{local}:{read}"
        if key not in self._modules:
            imported = self.own.imports.get(local)
            if imported is None:
                return None
            module, attr, level = imported
            dotted_name = f"{module}.{attr}" if attr and module else (attr or module)
            path = self.index.resolve(self.path, dotted_name, level)
            found = None
            if path is not None and self.index.may_define(path, name):
                found = self.index.facts(path, names=[read])
            self._modules[key] = found
        return self._modules[key]

    def _from_module(self, local: str, method: str | None = None, base: bool = False
                     ) -> tuple[ModuleFacts, str] | None:
        """(module facts, attribute) for ``from module import attribute as local``, if the module's
        text may define the attribute; with the facts of every function this file imports from it
        (read at once), or of the attribute's (a class's) ``method``; for a ``base`` class of this
        file's classes, also where its package's ``__init__.py`` re-exports it from."""
        imported = self.own.imports.get(local)
        if imported is None or not imported[1]:
            return None
        module, attr, level = imported
        key = f"from:{module}:{level}" if method is None else f"from:{module}:{level}:{attr}.{method}:{base}"
        if key not in self._modules:
            path = self.index.resolve(self.path, module, level)
            if path is not None and base:
                # a base class the package re-exports (`from core.utils import Trainer` of
                # `core/utils/train.py`); other names are read where they are imported from (cheap)
                path = self.index.defining(path, attr)
            if path is None:
                self._modules[key] = None
            elif not self.index.may_define(path, attr):
                return None  # another name imported from the module (same key) may still be defined there
            else:
                names = sorted({a for m, a, n in self.own.imports.values() if m == module and n == level and a}) \
                    if method is None else [f"{attr}.{method}"]
                self._modules[key] = self.index.facts(path, names=names)
        found = self._modules[key]
        return (found, attr) if found is not None else None

    def _function(self, local: str) -> Summary | None:
        found = self._from_module(local)
        if found is None or found[1] not in found[0].functions:
            return None
        return Summary(found[0].functions[found[1]], found[1], found[0].path)

    def _method(self, constructor: str, method: str, base: bool = False) -> Summary | None:
        """``method`` of the class ``constructor`` names (``Trainer``, ``engine.Trainer``), if a
        project module defines it with an effect (``base``: a base class of this file's classes)."""
        key = (constructor, method, base)  # every call on an object built by an imported class asks
        if key not in self._methods:
            self._methods[key] = self._read_method(constructor, method, base)
        return self._methods[key]

    def _read_method(self, constructor: str, method: str, base: bool = False) -> Summary | None:
        if "." not in constructor:
            built = self._function(constructor)  # a factory of its module: `create_loss_function(cfg)`
            if built is not None and built.facts.builds:
                return self._class_method(constructor, built.facts.builds, method)
        if "." in constructor:
            module, name = constructor.rsplit(".", 1)
            facts = self._module_of(module, name, f"{name}.{method}") if "." not in module else None
        else:
            found = self._from_module(constructor, method, base)
            facts, name = found if found is not None else (None, "")
        methods = facts.classes.get(name, {}) if facts is not None else {}
        return Summary(methods[method], method, facts.path) if facts is not None and method in methods else None


    def _class_method(self, local: str, cls: str, method: str) -> Summary | None:
        """``method`` of class ``cls`` of the module ``local`` is imported from."""
        module, _, level = self.own.imports[local]
        key = f"class:{module}:{level}:{cls}.{method}"
        if key not in self._modules:
            path = self.index.resolve(self.path, module, level)
            self._modules[key] = self.index.facts(path, names=[f"{cls}.{method}"]) \
                if path is not None and self.index.may_define(path, cls) else None
        facts = self._modules[key]
        methods = facts.classes.get(cls, {}) if facts is not None else {}
        return Summary(methods[method], method, facts.path) if facts is not None and method in methods else None


_LIBCST: tuple[ModuleType, ModuleType] | None = None


def _libcst() -> tuple[ModuleType, ModuleType]:
    """``libcst`` and ``loopcheck.model.syntax``, imported when a model first asks (a run that only
    reads cached results imports neither)."""
    global _LIBCST
    if _LIBCST is None:
        import libcst

        from loopcheck.model import syntax

        _LIBCST = libcst, syntax
    return _LIBCST


# Words of a module that touches DDP's gradient sync (``no_sync()``, the sync flag, apex's switch)
_SYNC_WORDS = ("no_sync", "require_backward_grad_sync", "no_backward_sync", "set_requires_gradient_sync",
               "skip_gradient_sync", "disable_allreduce")



def _class_span(text: bytes, name: str) -> tuple[int, int] | None:
    """The first and past-the-last line of the top-level ``class name`` of ``text``."""
    match = re.search(rb"^class[ \t]+" + re.escape(name.encode()) + rb"\b", text, re.M)
    if match is None:
        return None
    start = text.count(b"\n", 0, match.start()) + 1
    after = re.compile(rb"^[^\s#]", re.M).search(text, match.end())
    end = text.count(b"\n", 0, after.start()) + 1 if after is not None else text.count(b"\n") + 2
    return start, end


# Method names the model reads by themselves (a keeping method named so stays theirs)
_CLASSIFIED = Pattern(r"^(?:append|extend|update|step|backward|zero_grad|zero_|eval|train|unscale_)$|ema")


def _optimizer_named(name: str) -> bool:
    from loopcheck.project.facts import _OPTIMIZER_NAME

    return _OPTIMIZER_NAME.search(name.rsplit(".", 1)[-1]) is not None


def _stepped_as_other(name: str | None, roles: Roles) -> bool:
    """What the loop hands a helper's ``arg.step(...)`` is no optimizer: the file builds or names it as
    a scheduler, scaler, EMA or accelerator (``adjust(scheduler, val_loss)``), or as an environment
    (``test_net(net, test_env)`` with ``test_env = gym.make(...)``, whose ``step`` takes an action)."""
    from loopcheck.model.roles import Role
    from loopcheck.model.syntax import func_name, last_part

    if not name:
        return False
    if roles.of(name) in (Role.SCHEDULER, Role.SCALER, Role.EMA, Role.ACCELERATOR) or environment_name(name):
        return True
    return any((built := func_name(c)) is not None and environment_constructor(built)
               for c in roles.constructed.get(last_part(name), []))


def _scaler_name(call: cst.Call, scaler: int | str, args: dict[int, cst.BaseExpression]) -> str | None:
    """The scaler a wrapper steps through, as the caller would write it: the argument passed, or the
    wrapper's own attribute seen from the caller (``self.scaler`` of ``trainer.optimize(opt)``:
    ``trainer.scaler``)."""
    import libcst as cst

    from loopcheck.model.syntax import dotted, receiver

    if isinstance(scaler, int):
        return receiver(args[scaler]) if scaler in args else None
    owner = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
    return f"{owner}{scaler[4:]}" if owner and (scaler == "self" or scaler.startswith("self.")) else scaler


def _evals(facts: FunctionFacts, args: dict[int, cst.BaseExpression]) -> list[tuple[Kind, str | None, dict[str, object]]]:
    """The switches to eval mode a helper makes of the arguments ``args`` hands it, less those under a
    parameter test the call's literal skips (``evaluate(model, is_training=True)``)."""
    from loopcheck.model.events import Kind
    from loopcheck.model.syntax import receiver

    skipped = {position for position, gate, runs in facts.evals_unless
               if gate in args and _bool_literal(args[gate]) is (not runs)}
    return [(Kind.EVAL_MODE, receiver(args[position]), {}) for position in facts.evals
            if position in args and position not in skipped]


def _bool_literal(expr: cst.BaseExpression) -> bool | None:
    cst = _libcst()[0]
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def arguments(call: cst.Call, facts: FunctionFacts) -> dict[int, cst.BaseExpression]:
    """The call's arguments by the callee's parameter positions."""
    args: dict[int, cst.BaseExpression] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return args  # `*args`: positions after it are unknown
        if arg.keyword is None:
            args[position] = arg.value
            position += 1
        elif arg.keyword.value in facts.params:
            args[facts.params.index(arg.keyword.value)] = arg.value
    return args


def for_file(path: str | Path, cache_dir: Path | None = None, tree: ast.Module | None = None) -> Imported | None:
    """The project facts for the file at ``path`` (None for a file that does not exist); ``tree``:
    its ``ast``, if already parsed."""
    file = Path(path)
    if not file.is_file():
        return None
    index = project_index(find_root(file), cache_dir)
    _OPEN[(index.root, cache_dir)] = index
    own = index.facts(file, functions=False, tree=tree)
    if own is None:
        return None
    # `from utils import *`: the project's functions the file calls by their bare names, as if each
    # were imported by name (on a copy: these facts may be another file's view of this module)
    if own.star_imports:
        from loopcheck.project.star_imports import star_imported

        starred = star_imported(index, _index.real_path(file), own.star_imports)
        if starred:
            own = replace(own, imports={**starred, **own.imports})
    return Imported(_index.real_path(file), index, own, tree)


def _ddp_importers(imported: Imported) -> list[str]:
    index, own = imported.index, imported.own
    found = [where for where, target in _ddp_imports(index)
             if target == imported.path and not where.startswith(f"{own.path}:")]
    passes = [(where, method, param) for where, method, param in _ddp_passes(index)
              if not where.startswith(f"{own.path}:") and index.may_define(imported.path, method)]
    if passes:
        taking = _methods_taking(imported.path, imported._tree, {(method, param) for _, method, param in passes})
        found += [where for where, method, param in passes if (method, param) in taking and where not in found]
    return found


def _methods_taking(file: Path, tree: ast.Module | None, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of (method, keyword or position) that a class of ``file`` defines: a method of that
    name with a parameter of that name, or at that position after ``self``."""
    import ast

    if tree is None:
        try:
            tree = ast.parse(file.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return set()
    found: set[tuple[str, str]] = set()
    names = {method for method, _ in wanted}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for member in node.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name in names:
                params = [a.arg for a in [*member.args.posonlyargs, *member.args.args]][1:]  # after self
                keywords = {*params, *(a.arg for a in member.args.kwonlyargs)}
                found.update((m, p) for m, p in wanted if m == member.name and (
                    p in keywords or p.isdigit() and int(p) < len(params)))
    return found


def _ddp_imports(index: ProjectIndex) -> list[tuple[str, Path]]:
    """(``path:line`` of an entry script's DDP wrap, a project file it imports and uses), once per
    index: the module itself (``from pkg import engine``), or a module whose function the entry
    script calls (``from engine import train_one_epoch`` ... ``train_one_epoch(...)``)."""
    if index.ddp_imports is not None:
        return index.ddp_imports
    found: list[tuple[str, Path]] = []
    for entry in index.ddp_files():
        importer = index.root / entry.path
        where = f"{entry.path}:{entry.ddp_lines[0]}"
        for local, (module, attr, level) in entry.imports.items():
            targets = [index.resolve(importer, f"{module}.{attr}" if module else attr, level)] if attr else []
            if not attr or local in entry.called:
                target = index.resolve(importer, module, level)
                # `from engine import Trainer` of a package that re-exports it from `engine/training_engine.py`
                targets.append(index.defining(target, attr) if target is not None and attr else target)
            found.extend((where, _index.real_path(t)) for t in targets if t is not None)
    index.ddp_imports = found
    return found


def _ddp_passes(index: ProjectIndex) -> list[tuple[str, str, str]]:
    """(``path:line`` of a project file's DDP wrap, method, keyword or position) for each method
    call it hands that wrapper to (``self.task.train_epoch(model=self.model)``), once per index."""
    if index.ddp_passes is None:
        index.ddp_passes = [(f"{entry.path}:{entry.ddp_lines[0]}", method, param)
                            for entry in index.ddp_files() for method, param in entry.passes_ddp]
    return index.ddp_passes


def save() -> None:
    """Write the facts read so far to their caches (once, after the facts of every file are known)."""
    for index in _open_indexes():
        index.save()


def new_facts() -> list[tuple[Path, Path, dict[str, list[object]]]]:
    """(root, cache directory, entries) of the facts read since the last call, for ``merge`` in
    the process that saves them (a worker's facts would otherwise be lost with it)."""
    found = []
    for (root, cache_dir), index in _OPEN.items():
        fresh = index.take_fresh()
        if fresh and cache_dir is not None:
            found.append((root, cache_dir, fresh))
    return found


def merge(found: list[tuple[Path, Path, dict[str, list[object]]]]) -> None:
    """Add what ``new_facts`` gave in another process to the indexes ``save`` writes."""
    for root, cache_dir, entries in found:
        index = project_index(root, cache_dir)
        _OPEN[(root, cache_dir)] = index
        index.merge(entries)


def forget() -> None:
    """Drop the indexes read so far in this process (a new run reads the files again)."""
    _index.forget()
    _pins.forget()
    _launches.forget()
    _OPEN.clear()


def _open_indexes() -> list[ProjectIndex]:
    return list(_OPEN.values())


# `from ..models.mae import engine as e, other` / `import models.mae.engine, x`: the module part, the dots,
# and what follows `import`
# the rest of `getattr(trainer, cfg.name)` after the module: a configuration's value as it is, not a name built
_PLAIN_LOOKUP = Pattern(rb"[ \t]*,[ \t]*[A-Za-z_][\w.]*(?:\[[ \t]*[\"'][\w.-]*[\"'][ \t]*\])*[ \t]*\)")
_IMPORT_LINE = Pattern(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+)?import[ \t]+\(?([\w., \t]+)")


def _imported_modules(found: re.Match[bytes], stem: str) -> list[tuple[str, int]]:
    """The modules an import line loads whose last part is ``stem``, with its relative level:
    ``from models.mae import engine`` -> [("models.mae.engine", 0)]; [] where ``stem`` is not one."""
    dots, base, names = found.group(1), found.group(2), found.group(3)
    level = len(dots or b"")
    listed = [n.strip().split()[0].decode() for n in names.split(b",") if n.strip()]
    if dots is None and base is None:  # `import a.b.stem`
        return [(n, 0) for n in listed if n.rsplit(".", 1)[-1] == stem]
    module = base.decode()
    if module.rsplit(".", 1)[-1] == stem:
        return [(module, level)]
    return [(f"{module}.{n}" if module else n, level) for n in listed if n == stem]
