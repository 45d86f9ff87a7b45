"""What a file says about data parallelism, read off the training-loop model.

Which calls wrap a model in ``DistributedDataParallel`` / ``DataParallel``, where the file
controls DDP's gradient sync (``no_sync()``, ``require_backward_grad_sync``), on which micro-batch
of an accumulation window a sync condition holds, and where the forward pass of a DDP module ran.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> model = build(cst.parse_module("model = DDP(net)\\n"))
>>> [func_name(c) for c in wrap_calls(model, DDP_WRAPPERS)]
['DDP']
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Assignment, Event, Kind
from loopcheck.model.guards import Guard, GuardKind, Phase, exclusive
from loopcheck.model.roles import Role, Roles
from loopcheck.model.syntax import (
    dotted,
    func_name,
    int_value,
    keyword,
    last_part,
    method,
    names_in,
    own_call_name,
    positional,
    same,
    source,
    walk,
)
from loopcheck.model.training import Style, TrainingLoop, micro_count
from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.model import FileModel
    from loopcheck.model.index import Index

DDP_WRAPPERS = frozenset({"DistributedDataParallel", "DDP"})
DP_WRAPPERS = frozenset({"DataParallel"})
FSDP_WRAPPERS = frozenset({"FullyShardedDataParallel", "FSDP", "fully_shard"})
# Attributes through which a file controls when DDP all-reduces (apex's DistributedDataParallel:
# `disable_allreduce()` on the micro-batches before the boundary, `enable_allreduce()` on it).
SYNC_CONTROLS = frozenset({"no_sync", "require_backward_grad_sync", "no_backward_sync",
                           "set_requires_gradient_sync", "skip_gradient_sync", "disable_allreduce"})
_NO_SYNC_METHODS = frozenset({"no_sync", "no_backward_sync"})
# Names of flags that say whether the model is distributed at all (`args.local_rank`, `args.distributed`,
# `world_size > 1`, `n_gpu`): where one is false the model has no sync to skip.
DISTRIBUTION_FLAG = Pattern(r"sync|distrib|ddp|rank|world|gpu|parallel|multi|dist\b|nproc", re.I)


class Micro(enum.Enum):
    """The micro-batches of an accumulation window on which a condition holds."""

    LAST = "the last micro-batch"
    NOT_LAST = "every micro-batch but the last"
    FIRST = "the first micro-batch"
    NOT_FIRST = "every micro-batch but the first"
    OTHER = "one micro-batch that is not the last"
    NOT_OTHER = "every micro-batch but one that is not the last"

    @property
    def includes_last(self) -> bool:
        return self in (Micro.LAST, Micro.NOT_FIRST, Micro.NOT_OTHER)

    def negated(self) -> Micro:
        pairs = {Micro.LAST: Micro.NOT_LAST, Micro.FIRST: Micro.NOT_FIRST, Micro.OTHER: Micro.NOT_OTHER}
        pairs.update({v: k for k, v in list(pairs.items())})
        return pairs[self]


def wrap_calls(model: FileModel, wrappers: frozenset[str]) -> list[cst.Call]:
    """Calls of the file that build one of ``wrappers`` (``DDP(model, device_ids=[rank])``), also
    under a name the file imports it as (``DistributedDataParallel as NativeDDP``)."""
    names = wrappers | _imported_as(model.index.imports, wrappers)
    found = [c for c in model.index.calls if (name := func_name(c)) is not None and _one_of(last_part(name), names)]
    if found:  # a class of the file with no base by that name is a hand-written one (a lesson's DDP from scratch)
        own = {stmt.name.value for stmt in model.module.body if type(stmt) is cst.ClassDef and not stmt.bases}
        found = [c for c in found if func_name(c) not in own]
    return found


def _one_of(name: str, wrappers: frozenset[str]) -> bool:
    """``name`` is one of ``wrappers``; a subclass named for DDP (``MMDistributedDataParallel``, a
    project's ``PyTorchDistributedDataParallel(DDP)``) is DDP too: it all-reduces in every backward."""
    return name in wrappers or "DistributedDataParallel" in wrappers and name.endswith("DistributedDataParallel")


def one_rank_group(model: FileModel) -> bool:
    """Every ``init_process_group`` of the file names ``world_size=1`` (a literal): research scripts
    that wrap the model in DDP for one GPU run a group of one process, whose all-reduce moves nothing."""
    calls = [c for c in model.index.calls if last_part(func_name(c) or "") == "init_process_group"]
    return bool(calls) and all((found := keyword(c, "world_size")) is not None and int_value(found) == 1
                               for c in calls)


def apex_wraps(model: FileModel, wraps: list[cst.Call]) -> bool:
    """Whether each of ``wraps`` builds apex's ``DistributedDataParallel`` (``apex.parallel.
    DistributedDataParallel(model)``, or a name the file imports only from apex: ``from apex.parallel
    import DistributedDataParallel as DDP``), which has no ``no_sync()``."""
    sources: dict[str, set[bool]] = {}  # local name -> whether each import binding it is apex's
    for node in model.index.imports:
        if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            root = (dotted(node.module) or "").split(".")[0]
            for alias in node.names:
                local = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(local, cst.Name):
                    sources.setdefault(local.value, set()).add(root == "apex")
    return all((name := func_name(c)) is not None
               and (name.startswith("apex.") or sources.get(name) == {True}) for c in wraps)


def _imported_as(imports: list[cst.Import | cst.ImportFrom], wrappers: frozenset[str]) -> frozenset[str]:
    """The local names ``from torch.nn.parallel import DistributedDataParallel as NativeDDP`` binds
    to one of ``wrappers``."""
    found = set()
    for node in imports:
        if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name) \
                        and isinstance(alias.name, cst.Name) and _one_of(alias.name.value, wrappers):
                    found.add(alias.asname.name.value)
    return frozenset(found)


def helpers_control_sync(model: FileModel) -> bool:
    """Whether the file calls a helper of another project module that touches DDP's gradient sync
    (``with misc.ddp_sync(ddp, last_round):``)."""
    project = model.project
    return project is not None and any(s.facts.controls_sync for _, s in project.calls(model.index.calls))


class SyncUnits:
    """Where in the file the sync (``no_sync()``, the sync flag) is touched, by top-level class or
    function ("unit"), so that one trainer class's ``no_sync()`` does not vouch for the loop of
    another trainer class of the file that never syncs. A unit that touches the sync
    may reach a loop when it holds the loop, or when it and the loop's unit name one another (a
    helper ``with ddp_sync(model, last):``, a base class, a ``main()`` that builds the trainer): a
    method is reached from outside its class only through the class's name. Code outside any
    top-level class or function that touches the sync may reach every loop.

    Each part of the file is walked only when an answer needs it: a loop at module level, or in a
    unit that touches the sync itself, needs no other part."""

    def __init__(self, module: cst.Module) -> None:
        self._body = module.body
        self._everywhere: bool | None = None
        self._read: dict[int, _Unit] = {}  # id of a top-level class or function -> its unit

    @property
    def everywhere(self) -> bool:
        """Code outside any top-level class or function touches the sync."""
        if self._everywhere is None:
            self._everywhere = any(_touches_sync(n) for stmt in self._body if type(stmt) not in _UNIT_TYPES
                                   for n in walk(stmt, into_functions=True))
        return self._everywhere

    def may_sync(self, function: cst.FunctionDef | None) -> bool:
        """Whether the file's own sync control may reach a loop of ``function``."""
        if function is None:
            return True
        mine = self._holding(function)
        if mine is None or mine.syncs or self.everywhere:
            return True
        return any(u.syncs and (u.name in mine.named or mine.name in u.named) for u in map(self._unit, self._units()))

    def _units(self) -> list[cst.ClassDef | cst.FunctionDef]:
        return [s for s in self._body if type(s) in _UNIT_TYPES]

    def _holding(self, function: cst.FunctionDef) -> _Unit | None:
        units = self._units()
        if any(s is function for s in units):  # a top-level function: no walk needed to find it
            return self._unit(function)
        return next((u for u in map(self._unit, units) if id(function) in u.functions), None)

    def _unit(self, stmt: cst.ClassDef | cst.FunctionDef) -> _Unit:
        found = self._read.get(id(stmt))
        if found is None:
            found = self._read[id(stmt)] = _Unit(stmt)
        return found


_UNIT_TYPES = (cst.ClassDef, cst.FunctionDef)


class _Unit:
    """One top-level class or function: its functions (ids), whether it touches the sync, its name
    and the names it reads."""

    def __init__(self, stmt: cst.ClassDef | cst.FunctionDef) -> None:
        self.name = stmt.name.value
        self.functions: set[int] = set()
        self.named: set[str] = set()
        self.syncs = False
        for node in walk(stmt, into_functions=True):
            kind = type(node)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
            if kind is cst.FunctionDef:
                self.functions.add(id(node))
            elif kind is cst.Name:
                self.named.add(node.value)
            elif not self.syncs:
                self.syncs = _touches_sync(node)


def _touches_sync(node: cst.CSTNode) -> bool:
    kind = type(node)
    if kind is cst.Attribute:
        return node.attr.value in SYNC_CONTROLS
    if kind is cst.SimpleString:  # getattr(model, "no_sync"), setattr(..., "require_backward_grad_sync", ...)
        return any(name in node.value for name in SYNC_CONTROLS)
    return False


def imported_ddp_wraps(model: FileModel) -> list[str]:
    """Where another module of the project wraps this file's model in DDP: a helper this file calls
    (``model = smart_DDP(model)``, "utils/torch_utils.py:61"), an entry script that imports this
    file, calls into it and builds a DDP wrapper ("main_pretrain.py:175"), or a file that hands this
    file what a project helper returned wrapped ("loader.py:274")."""
    project = model.project
    if project is None:
        return []
    found = [s.where for _, s in project.calls(model.index.calls) if s.facts.wraps_ddp] + list(project.ddp_importers)
    # the handing files are parsed only where nothing nearer wraps the model (the rule names one place)
    return found or _held_helper_wraps(model) or list(project.ddp_handed)


def _held_helper_wraps(model: FileModel) -> list[str]:
    """Where a DDP-returning helper of another project module wraps a model this file rebinds to its
    result through an object no import resolves: ``self.model = self.adapter.model_to_ddp(self.model)``
    (the entry script hands the trainer the helpers' module). Only a call given the name it binds:
    the model itself, rewrapped."""
    project = model.project
    helpers = dict(project.ddp_helpers_called) if project is not None else {}
    if not helpers:
        return []
    found = []
    for name, calls in model.roles.constructed.items():
        for call in calls:
            func = func_name(call) or ""
            root, _, rest = func.partition(".")
            if rest and last_part(func) in helpers and root not in project.own.imports and any(
                    a.keyword is None and last_part(dotted(a.value) or "") == name for a in call.args):
                found.append(helpers[last_part(func)])
    return list(dict.fromkeys(found))


def base_ddp_wraps(model: FileModel) -> dict[str, str]:
    """Top-level class of this file -> where its first base, a class of another project module,
    wraps a model in DDP (``class Trainer(BaseTrainer)``, "trainers/base.py:41")."""
    project = model.project
    if project is None:
        return {}
    found = {}
    for stmt in model.module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.bases:
            base = dotted(stmt.bases[0].value)
            where = project.base_ddp_wrap(base) if base else None
            if where is not None:
                found[stmt.name.value] = where
    return found


def no_sync_receiver(expr: cst.BaseExpression | None, uncalled: bool = False) -> str | None:
    """``model`` for ``model.no_sync()`` (and for ``model.no_sync`` itself with ``uncalled``: a context
    manager picked now and entered later, ``ctx = model.no_sync if ... else nullcontext``)."""
    if isinstance(expr, cst.Call):
        called = method(expr)
        if called is not None and called[1] in _NO_SYNC_METHODS and not expr.args:
            return dotted(called[0])
    if uncalled and isinstance(expr, cst.Attribute) and expr.attr.value in _NO_SYNC_METHODS:
        return dotted(expr.value)
    return None


def conditional_no_sync(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool, str] | None:
    """``model.no_sync() if test else nullcontext()`` -> (test, True, "model"): the test, whether
    no_sync applies when it holds, and the DDP module. The other branch must not sync-control."""
    if not isinstance(expr, cst.IfExp):
        return None
    body, orelse = no_sync_receiver(expr.body, uncalled=True), no_sync_receiver(expr.orelse, uncalled=True)
    if (body is None) == (orelse is None):
        return None
    return expr.test, body is not None, (body or orelse)  # type: ignore[return-value]


def helper_no_sync(call: cst.BaseExpression, functions: dict[str, list[cst.FunctionDef]]) -> cst.IfExp | None:
    """``with maybe_no_sync(model, is_last):`` where the file's one function of that name returns
    ``model.no_sync()`` on one branch and a do-nothing context (``nullcontext()``, ``ExitStack()``) on
    the other (``if not sync: return model.no_sync()`` / ``return nullcontext()``, or the same as one
    conditional expression; fairseq's nested ``maybe_no_sync()``): that choice written at the call,
    its parameters replaced by what the call hands them, as ``model.no_sync() if not is_last else
    nullcontext()``. None where the helper does anything else or a parameter is not handed a value."""
    name = own_call_name(call) if isinstance(call, cst.Call) else None
    found = functions.get(name, []) if name is not None else []
    if len(found) != 1 or found[0].decorators:
        return None
    chosen = _returned_choice(found[0].body)
    given = _arguments(call, found[0]) if chosen is not None else None  # type: ignore[arg-type]
    if chosen is None or given is None:
        return None
    # re-parsed from its text: the tree built from Python's ast is read, not transformed or composed
    try:
        parsed = cst.parse_expression("({}) if ({}) else ({})".format(*(source(part) for part in chosen)))
        values = {k: cst.parse_expression(source(v)) for k, v in given.items()}
    except cst.ParserSyntaxError:
        return None
    if conditional_no_sync(parsed) is None:
        return None
    return parsed.visit(_Substitute(values))  # type: ignore[return-value]


def _returned_choice(suite: cst.BaseSuite) -> tuple[cst.BaseExpression, cst.BaseExpression,
                                                     cst.BaseExpression] | None:
    """``return a if t else b``, or ``if t: return a`` then ``return b`` (or ``else: return b``): ``(a,
    t, b)``; None for any other statement (a docstring aside)."""
    stmts = [s for s in _statements(suite) if not (isinstance(s, cst.Expr) and isinstance(
        s.value, (cst.SimpleString, cst.ConcatenatedString)))]
    if len(stmts) == 1 and isinstance(stmts[0], cst.Return) and isinstance(stmts[0].value, cst.IfExp):
        return stmts[0].value.body, stmts[0].value.test, stmts[0].value.orelse
    if len(stmts) == 1 and isinstance(stmts[0], cst.If) and isinstance(stmts[0].orelse, cst.Else):
        branch, other = stmts[0], _returned(_statements(stmts[0].orelse.body))
    elif len(stmts) == 2 and isinstance(stmts[0], cst.If) and stmts[0].orelse is None:
        branch, other = stmts[0], _returned(stmts[1:])
    else:
        return None
    body = _returned(_statements(branch.body))
    if body is None or other is None:
        return None
    return body, branch.test, other


def _statements(suite: cst.BaseSuite) -> list[cst.CSTNode]:
    """The statements of a block, a line's small statements taken one by one (``if t: return a``
    on one line and indented read alike)."""
    found: list[cst.CSTNode] = []
    for stmt in suite.body:
        found.extend(stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt])
    return found


def _returned(stmts: list[cst.CSTNode]) -> cst.BaseExpression | None:
    """The value of the one ``return`` that is all of ``stmts``."""
    return stmts[0].value if len(stmts) == 1 and isinstance(stmts[0], cst.Return) else None


def _arguments(call: cst.Call, function: cst.FunctionDef) -> dict[str, cst.BaseExpression] | None:
    """Parameter name -> the expression ``call`` hands it (a default where it hands none); None where a
    parameter is left without a value or the call uses ``*args`` / ``**kwargs``."""
    params = list(function.params.params)
    if isinstance(call.func, cst.Attribute) and params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    if function.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or function.params.kwonly_params \
            or function.params.star_kwarg is not None or any(a.star for a in call.args):
        return None
    given: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(call.args):
        if arg.keyword is not None:
            given[arg.keyword.value] = arg.value
        elif position < len(params):
            given[params[position].name.value] = arg.value
        else:
            return None
    for param in params:
        if param.name.value not in given:
            if param.default is None:
                return None
            given[param.name.value] = param.default
    return given


class _Substitute(cst.CSTTransformer):
    """Each parameter's name replaced by the expression handed to it."""

    def __init__(self, given: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.given = given

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:  # type: ignore[override]
        value = self.given.get(original.value)
        return cst.ensure_type(value, cst.BaseExpression).deep_clone() if value is not None else updated

    def leave_Attribute(  # type: ignore[override]
            self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)  # `model.no_sync`: the receiver only is a name

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:  # type: ignore[override]
        return updated.with_changes(keyword=original.keyword)  # `nullcontext(enter_result=...)`


def micro_from_guard(guard: Guard) -> Micro | None:
    """On which micro-batches of a window an event under ``guard`` runs, where that is certain."""
    if guard.kind in (GuardKind.SYNC,):
        return Micro.LAST
    if guard.kind is GuardKind.NOT_SYNC:
        return Micro.NOT_LAST
    if guard.kind is GuardKind.LAST:
        if guard.partial:
            return None
        test = guard.test
        if isinstance(test, cst.Comparison) and not isinstance(test.comparisons[0].operator, cst.Equal):
            return None  # `i + 1 < len(loader)` is read as "last" by the guard reader: not certain
        return Micro.LAST
    phase = {Phase.BOUNDARY: Micro.LAST, Phase.START: Micro.FIRST, Phase.OFF: Micro.OTHER, Phase.LATE: Micro.OTHER}.get(guard.phase)
    if phase is None:
        return None
    if guard.kind is GuardKind.PERIODIC:
        return phase
    if guard.kind is GuardKind.NOT_PERIODIC:
        return phase.negated()
    return None


def micro_of(test: cst.BaseExpression, training: TrainingLoop, order: int | None) -> Micro | None:
    """On which micro-batches of a window ``test`` holds, where that is certain."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = micro_of(test.expression, training, order)
        return inner.negated() if inner is not None else None
    name = dotted(test)
    alias = _alias(training, name, order) if name is not None else None
    if alias is not None:  # `skip_sync = ...` earlier in the iteration
        return micro_of(alias, training, None)
    varying = without_flag(test, training, order)
    if varying is not test:
        return micro_of(varying, training, order)
    if training.style is Style.MICRO_LOOP:
        found = _micro_loop_test(test, training)
        if found is not None:
            return found
    return micro_from_guard(training.reader.atom(test, False, order, 0))


def without_flag(test: cst.BaseExpression, training: TrainingLoop, order: int | None) -> cst.BaseExpression:
    """The side of ``flag and test`` that varies, where the other is an invariant flag (``multi_gpu and
    micro < len(chunks) - 1``: the flag holds on every micro-batch); ``test`` itself otherwise."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        sides = [test.left, test.right]
        flags = [s for s in sides if training.reader.atom(s, False, order, 0).kind is GuardKind.INVARIANT]
        if len(flags) == 1:
            return sides[1 - sides.index(flags[0])]
    return test


def _alias(training: TrainingLoop, name: str, order: int | None) -> cst.BaseExpression | None:
    """The value of the one plain assignment to ``name`` in the loop before ``order``."""
    found = [a for a in training.loop.assignments if a.names == (name,) and a.op == "="
             and (order is None or a.order < order)]
    return found[0].value if len(found) == 1 and not isinstance(found[0].value, cst.Call) else None


def _micro_loop_test(test: cst.BaseExpression, training: TrainingLoop) -> Micro | None:
    """``micro == N - 1`` / ``micro + 1 < N`` / ``micro == 0`` in ``for micro in range(N)``."""
    count = micro_count(training.loop)
    target = dotted(training.loop.target) if training.loop.target is not None else None
    it = training.loop.iter
    if count is None and isinstance(it, cst.Call) and func_name(it) == "enumerate" and positional(it) \
            and isinstance(training.loop.target, cst.Tuple):  # `for i, chunk in enumerate(chunks)`: N = len(chunks)
        count = cst.Call(cst.Name("len"), [cst.Arg(positional(it)[0])])
        target = dotted(training.loop.target.elements[0].value)
    if count is None or target is None or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    left, op, right = test.left, test.comparisons[0].operator, test.comparisons[0].comparator
    offset = 0
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Add) and int_value(left.right) == 1:
        left, offset = left.left, 1
    if dotted(left) != target:
        return None
    if int_value(right) == 0 and offset == 0:
        return {cst.Equal: Micro.FIRST, cst.NotEqual: Micro.NOT_FIRST,
                cst.GreaterThan: Micro.NOT_FIRST}.get(type(op))
    last = (offset == 0 and isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Subtract)
            and int_value(right.right) == 1 and same(right.left, count)) or (offset == 1 and same(right, count))
    if not last:
        return None
    return {cst.Equal: Micro.LAST, cst.GreaterThanEqual: Micro.LAST, cst.NotEqual: Micro.NOT_LAST,
            cst.LessThan: Micro.NOT_LAST}.get(type(op))


def forwards(training: TrainingLoop, module: str, before: Event, index: Index | None = None) -> list[Assignment]:
    """Assignments of the training loop, before ``before`` and not on an exclusive branch, whose
    value calls the DDP ``module`` itself (``logits = model(x)``, ``loss = crit(model(x), y)``), or,
    given the file's ``index``, through a function of the file that runs it
    (``loss = self._train_forward(batch)``)."""
    found = []
    for assignment in training.loop.assignments:
        if assignment.order >= before.order or assignment.op == "for" or exclusive(assignment.conds, before.conds):
            continue
        if any(isinstance(n, cst.Call) and (dotted(n.func) == module or index is not None
                                            and forward_helper(n, module, index)) for n in walk(assignment.value)):
            found.append(assignment)
    return found


def forward_helper(call: cst.Call, module: str, index: Index) -> bool:
    """``self._train_forward(batch)`` where the file's function of that name calls ``module(...)``
    and leaves the sync alone (no ``no_sync()`` or sync flag of its own), with gradients on (no
    ``no_grad`` / ``inference_mode`` anywhere in it). Where several classes of the file define it
    (a trainer's ``compute_loss`` and its subclass's), every one must: whichever runs, runs the forward."""
    name = own_call_name(call)
    found = index.functions.get(name, []) if name is not None else []
    return bool(found) and all(_runs_forward(call, function, module) for function in found)


def _runs_forward(call: cst.Call, function: cst.FunctionDef, module: str) -> bool:
    if any(last_part(_decorator_name(d.decorator)) in ("no_grad", "inference_mode") for d in function.decorators):
        return False
    nodes = list(walk(function))
    if any(isinstance(n, cst.Attribute) and n.attr.value in SYNC_CONTROLS
           or isinstance(n, cst.Call) and last_part(func_name(n) or "") in ("no_grad", "inference_mode")
           for n in nodes):
        return False
    called = {module} | _parameters_given(call, function, module)
    return any(isinstance(n, cst.Call) and dotted(n.func) in called for n in nodes)


def _parameters_given(call: cst.Call, function: cst.FunctionDef, module: str) -> set[str]:
    """The parameters of ``function`` that ``call`` hands ``module`` to (``self._log_prob(x,
    self.model)`` to ``def _log_prob(self, x, model)``: ``model``)."""
    params = [p.name.value for p in function.params.params]
    if isinstance(call.func, cst.Attribute) and params[:1] in (["self"], ["cls"]):
        params = params[1:]
    found = set()
    for position, arg in enumerate(call.args):
        if arg.star or dotted(arg.value) != module:
            continue
        if arg.keyword is not None:
            found.add(arg.keyword.value)
        elif position < len(params):
            found.add(params[position])
    return found


def accelerator_no_sync(call: cst.BaseExpression, roles: Roles) -> str | None:
    """``model`` for ``accelerator.no_sync(model)``: Accelerate enters the prepared module's own
    ``no_sync()`` (DDP's under a multi-process launch)."""
    called = method(call) if isinstance(call, cst.Call) else None
    if called is None or called[1] != "no_sync" or len(call.args) != 1 or call.args[0].keyword or call.args[0].star \
            or roles.of(dotted(called[0]) or "") is not Role.ACCELERATOR:
        return None
    return dotted(call.args[0].value)


def _decorator_name(decorator: cst.BaseExpression) -> str:
    """``torch.no_grad`` for ``@torch.no_grad()`` and ``@torch.no_grad``."""
    return (func_name(decorator) if isinstance(decorator, cst.Call) else dotted(decorator)) or ""


def sync_manager(call: cst.BaseExpression, index: Index) -> bool:
    """``self.no_sync(not should_step)`` where the file's one function of that name is a context
    manager that turns DDP's sync off itself: it sets ``require_backward_grad_sync`` on the modules
    or enters their ``no_sync()`` (a switch of the trainer's own, over all its DDP modules)."""
    name = own_call_name(call) if isinstance(call, cst.Call) else None
    found = index.functions.get(name, []) if name is not None else []
    if len(found) != 1 or not any(last_part(_decorator_name(d.decorator)) == "contextmanager"
                                  for d in found[0].decorators):
        return False
    return any(isinstance(n, cst.Attribute) and n.attr.value == "require_backward_grad_sync"
               or isinstance(n, cst.Call) and no_sync_receiver(n) is not None for n in walk(found[0]))


def loss_sources(training: TrainingLoop, backward: Event, own: bool = True) -> list[Assignment]:
    """The assignments of the loop that the loss handed to ``backward`` is computed from, followed
    back through the names each one reads (without ``own``, not through the object's own
    attributes: ``self.scaler.scale(loss / self.accum)`` is computed from ``loss``)."""
    found: list[Assignment] = []
    wanted = {n.split(".", 1)[0] for n in names_in(backward.loss)} if backward.loss is not None else set()
    if not own:
        wanted -= {"self"}
    todo, seen = list(wanted), set()
    while todo and len(seen) < 100:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for assignment in training.loop.assignments:
            if assignment.order < backward.order and assignment.op != "for" and any(
                    n.split(".", 1)[0] == name for n in assignment.names):
                found.append(assignment)
                roots = {n.split(".", 1)[0] for n in names_in(assignment.value)}
                todo.extend(roots if own else roots - {"self"})
    return found


def in_no_sync(contexts: tuple[object, ...], module: str) -> bool:
    """Whether ``contexts`` (of an event or assignment) hold ``module.no_sync()``, conditional or not."""
    for context in contexts:
        call = context.call
        if context.kind.startswith("no_sync") and (
                no_sync_receiver(call) == module or (conditional_no_sync(call) or (None, None, None))[2] == module
                or isinstance(call, cst.Call) and any(dotted(a.value) == module for a in call.args)):
            return True  # `accelerator.no_sync(module)` too
    return False


def sync_flags(training: TrainingLoop) -> list[Event]:
    return training.loop.events(Kind.GRAD_SYNC_FLAG)
