"""The training-loop model of one file: built once, read by every rule.

>>> import libcst as cst
>>> model = build(cst.parse_module("for x, y in loader:\\n    loss = crit(net(x), y)\\n"
...                                "    loss.backward()\\n    opt.step()\\n    opt.zero_grad()\\n"))
>>> [t.style.name for t in model.training_loops]
['PLAIN']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.config import Options
from loopcheck.model.builder import Builder
from loopcheck.model.events import Assignment, Cond, Context, Event, Framework, Kind, Loop
from loopcheck.model.guards import Guard, GuardKind, Phase, flag_form, flag_key, forget_flag_keys
from loopcheck.model.ignite import process_functions
from loopcheck.model.index import Index, index_module
from loopcheck.model.roles import Role, Roles
from loopcheck.model.syntax import conjuncts, disjuncts, dotted, int_value, last_small, walk
from loopcheck.model.training import Style, TrainingLoop
from loopcheck.model.values import option_defaults
from loopcheck.model.batch_callers import per_batch_calls
from loopcheck.model.variants import training_loops

if TYPE_CHECKING:
    from loopcheck.project import Imported

__all__ = ["Assignment", "Cond", "Context", "Event", "FileModel", "Framework", "Guard", "GuardKind", "Kind",
           "Loop", "Phase", "Role", "Roles", "Style", "TrainingLoop", "build"]


@dataclass
class FileModel:
    module: cst.Module
    index: Index
    scopes: list[Loop]  # one pseudo-loop per function (and the module) holding its loops
    training_loops: list[TrainingLoop]
    source: str = ""
    owners: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)  # statement -> block statement
    options: Options = field(default_factory=Options)  # settings from [tool.loopcheck]
    project: Imported | None = None  # facts of the project modules the file imports (loopcheck.project)
    filename: str = ""  # the checked file's path as given ("<string>" for text)
    # what several rules read of the whole file, read once (``optimizer_modules``)
    read_once: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    def owner(self, stmt: cst.CSTNode) -> cst.CSTNode | None:
        """The statement whose block holds ``stmt`` directly (a For, If, Else, With, def...)."""
        return self.owners.get(stmt)

    @property
    def roles(self) -> Roles:
        return self.index.roles

    def loops(self) -> Iterator[Loop]:
        """Every loop of every scope, outer loops first."""
        stack = [loop for scope in self.scopes for loop in scope.loops]
        while stack:
            loop = stack.pop(0)
            yield loop
            stack.extend(loop.loops)

    def events(self, *kinds: Kind) -> list[Event]:
        return [e for scope in self.scopes for e in scope.events(*kinds, deep=True)]

    def variants(self, training: TrainingLoop) -> list[TrainingLoop]:
        """Every variant of the loop ``training`` is one of (itself included): a change to a
        statement they share must be right in each."""
        return [t for t in self.training_loops if t.loop.node is training.loop.node]


def build(module: cst.Module, source: str = "", options: Options | None = None,
          project: Imported | None = None) -> FileModel:
    index = index_module(module)
    forget_flag_keys(index.values)
    index.process_functions = process_functions(index)
    _add_option_defaults(index)
    _add_call_arguments(index)
    builder = Builder(module, index, project)
    # Only scopes that hold a loop can hold a training loop; other functions are inlined where called.
    scopes = [builder.scope(module)] if module in index.with_loops else []
    scopes += [builder.scope(fn) for fns in index.functions.values() for fn in fns if fn in index.with_loops]
    # A function inlined into a caller's loop is analysed there, with the caller's context.
    scopes = [s for s in scopes if s.function is None or s.function not in builder.inlined]
    # A step function with no loop of its own (called once per micro-batch by a loop elsewhere) may
    # accumulate across its calls; variants.training_loops keeps it where it steps on a call counter.
    scopes += [builder.scope(fn) for fns in index.functions.values() for fn in fns
               if fn in index.eventful and fn not in index.with_loops and fn not in builder.inlined
               and not index.foreign]  # (another framework's file: its loops are out of scope, not step functions)
    model = FileModel(module, index, scopes, [], source, builder.owners, options or Options(), project)
    constants = _constants(index, source)
    if constants:
        for loop in [*scopes, *model.loops()]:
            loop.assumptions = constants
    for scope in scopes:
        switched = {**_raised_before_loops(scope), **_switched_before_loops(scope)}
        if switched:
            for loop in scope.nest():
                loop.assumptions = {**switched, **loop.assumptions}
        for top in scope.loops:
            entered = _entered_under(top)
            if entered:
                for loop in top.nest():
                    loop.assumptions = {**entered, **loop.assumptions}
    model.training_loops = training_loops(scopes, index, _steps_beside(module, builder),
                                          lambda fn: bool(per_batch_calls(module, index, fn)))
    return model


def _steps_beside(module: cst.Module, builder: Builder) -> Callable[[cst.FunctionDef], list[Event]]:
    """The optimizer steps of the methods beside a method in its class, where none of them also
    back-propagates (an ``update()`` that clips, steps and zeroes), modelled on first use."""
    classes: dict[cst.FunctionDef, list[cst.FunctionDef]] = {}
    for stmt in module.body:
        if type(stmt) is cst.ClassDef and type(stmt.body) is cst.IndentedBlock:  # type: ignore[attr-defined]
            methods = [m for m in stmt.body.body if type(m) is cst.FunctionDef]  # type: ignore[attr-defined]
            for m in methods:
                classes[m] = methods
    found: dict[cst.FunctionDef, list[Event]] = {}

    def steps(fn: cst.FunctionDef) -> list[Event]:
        out: list[Event] = []
        for other in classes.get(fn, []):
            if other is fn or other not in builder.index.eventful:
                continue
            if other not in found:
                scope = builder.scope(other)
                found[other] = [] if scope.events(Kind.BACKWARD, deep=True) else scope.events(Kind.STEP, deep=True)
            out.extend(found[other])
        return out

    return steps


def _add_option_defaults(index: Index) -> None:
    """``parser.add_argument("--start-step", type=int, default=0)``: ``args.start_step`` starts at 0 on
    a fresh run, like a name set to 0 before a resume may change it."""
    for name, default in option_defaults(index):
        index.int_inits.setdefault(name, set()).add(int_value(default))


def _add_call_arguments(index: Index) -> None:
    """``train(model, loader, start_step=1)``: what the file's calls pass to a parameter of one of its
    functions, under ``"train(start_step)"``; the integer literals among them (None for a call that
    passes something else) also go to ``int_inits``, so that ``enumerate(loader, start=start_step)``
    starts where the callers say, not at the default."""
    for call in index.calls:
        func = call.func
        kind = type(func)  # exact types: isinstance() on libcst's ABCs is slow
        name = func.value if kind is cst.Name else func.attr.value if kind is cst.Attribute else None
        fns = index.functions.get(name, []) if name else []
        if len(fns) != 1:
            continue
        params = [p.name.value for p in fns[0].params.params if p.name.value not in ("self", "cls")]
        if kind is cst.Name and fns[0].params.params and fns[0].params.params[0].name.value == "self":
            continue
        for position, arg in enumerate(call.args):
            if arg.star:
                break
            param = arg.keyword.value if arg.keyword is not None else params[position] if position < len(params) else None
            if param is not None:
                index.arguments.setdefault(f"{name}({param})", []).append(arg.value)
                index.int_inits.setdefault(f"{name}({param})", set()).add(int_value(arg.value))


def _switched_before_loops(scope: Loop) -> dict[str, bool]:
    """Flags a function sets to a literal truth value before its loops (``self.is_test = False`` at the
    top of a DQN agent's ``train()``) and nothing else in it sets (its loops, the helpers inlined in
    them): code under ``if self.is_test:`` in those loops is dead."""
    if scope.function is None or not scope.loops:
        return {}
    start = scope.loops[0].order
    found = {a.names[0]: a.value.value == "True" for a in scope.assignments  # type: ignore[attr-defined]
             if a.op == "=" and not a.conds and a.order < start and len(a.names) == 1 and a.names[0].count(".") <= 1
             and type(a.value) is cst.Name and a.value.value in ("True", "False")}  # type: ignore[attr-defined]
    if not found:
        return found  # (most functions: the bindings of every loop are not counted)
    counted: dict[str, int] = {}
    for loop in scope.nest():
        for assignment in loop.assignments:
            for name in assignment.names:
                counted[name] = counted.get(name, 0) + 1
    return {name: value for name, value in found.items() if counted.get(name) == 1}


def _raised_before_loops(scope: Loop) -> dict[str, bool]:
    """Flags a function rules out before its loops by raising: ``if args.local_rank != -1 or
    args.n_gpu > 1: raise ValueError("distributed training is not supported")`` at its top means
    code under ``if args.local_rank != -1:`` after it never runs (the DDP wrap there is dead)."""
    function = scope.function
    if function is None or not scope.loops or type(function.body) is not cst.IndentedBlock:
        return {}
    found: dict[str, bool] = {}
    for stmt in function.body.body:
        if type(stmt) is not cst.If:
            if any(type(n) in (cst.For, cst.While) for n in walk(stmt)):
                break  # only what is ruled out before the first loop holds in every loop
            continue
        if stmt.orelse is not None or type(last_small(stmt.body)) is not cst.Raise:
            if any(type(n) in (cst.For, cst.While) for n in walk(stmt)):
                break
            continue
        for disjunct in disjuncts(stmt.test):
            negated = type(disjunct) is cst.UnaryOperation and type(disjunct.operator) is cst.Not  # type: ignore[attr-defined]
            key, positive = flag_key(disjunct.expression if negated else disjunct)  # type: ignore[attr-defined]
            found[key] = positive if negated else not positive
    return found


def _entered_under(loop: Loop) -> dict[str, bool]:
    """Flags a loop is entered under (``if not args.inference_only:`` around a function's training
    loop) that nothing in it sets: code under ``if args.inference_only:`` in it, or in the helpers
    inlined there, never runs."""
    found: dict[str, bool] = {}
    for cond in loop.conds:
        if cond.test is None:
            continue
        parts = [cond.test] if cond.negated else conjuncts(cond.test)  # `else:` of `a and b` holds neither
        for part in parts:
            negated = type(part) is cst.UnaryOperation and type(part.operator) is cst.Not  # type: ignore[attr-defined]
            flag = part.expression if negated else part  # type: ignore[attr-defined]
            name = dotted(flag_form(flag)[0])
            if name is None:
                continue
            key, positive = flag_key(flag)
            found[key] = positive ^ negated ^ cond.negated
    if not found:
        return found
    assigned = {n for sub in loop.nest() for a in sub.assignments for n in a.names}
    return {key: value for key, value in found.items() if key not in assigned and not assigned & _roots(key)}


def _roots(key: str) -> set[str]:
    """``args.inference_only`` -> {"args", "args.inference_only"}: rebinding either changes the flag."""
    parts = key.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _constants(index: Index, source: str) -> dict[str, bool]:
    """Module switches such as ``USE_AMP = False``: an upper-case name given one literal truth value
    in the whole file (and no ``exec`` that could rebind it): code under ``if USE_AMP:`` is dead."""
    if "exec(" in source or "globals()" in source:
        return {}
    found: dict[str, bool] = {}
    for name, values in index.values.items():
        if name.isupper() and len(values) == 1 and isinstance(values[0], cst.Name) \
                and values[0].value in ("True", "False"):
            found[name] = values[0].value == "True"
    return found
