"""What an object in a training loop is: optimizer, scheduler, GradScaler, EMA, engine, ...

``QualifiedNameProvider`` cannot answer this (``opt.step()`` is just ``opt.step`` to it), so the
file's own assignments decide (``opt = torch.optim.AdamW(...)``), followed through what the file
binds a name to (an alias ``v = self.optimizer``, a branch of ``GradScaler() if amp else None``, a
class held in a name, a function or method of the file that returns the object, an element of the
tuple such a function returns), and the variable's name decides when the file does not say what
the object is (``self.lr_scheduler.step()``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, is_none, last_part, method, own_call_name
from loopcheck.patterns import Pattern


class Role(enum.Enum):
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    SCALER = "scaler"
    EMA = "ema"
    ENGINE = "engine"
    ACCELERATOR = "accelerator"
    UNKNOWN = "unknown"


# Deep-learning frameworks whose `loss.backward()` / `optimizer.step()` look like torch's but are not.
FOREIGN_FRAMEWORKS = frozenset({"paddle", "mindspore", "jax", "flax", "optax", "tensorflow", "tf", "keras",
                                "oneflow", "jittor", "megengine", "mxnet", "chainer"})

# Constructor names (last dotted part) and what they build.
_OPTIMIZERS = {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
               "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Lion", "LAMB", "Lamb", "LARS", "AdamW8bit",
               "Adam8bit", "ZeroRedundancyOptimizer", "FusedAdam", "FusedLAMB", "Muon", "Shampoo", "SAM",
               # bitsandbytes' 32-bit, paged and Lion variants; adam-atan2-pytorch's; StableAdamW
               "Adam32bit", "AdamW32bit", "PagedAdam", "PagedAdamW", "PagedAdam8bit", "PagedAdamW8bit",
               "PagedAdam32bit", "PagedAdamW32bit", "Lion8bit", "Lion32bit", "PagedLion", "PagedLion8bit",
               "PagedLion32bit", "AdamAtan2", "AdoptAtan2", "StableAdamW", "StableAdamWUnfused"}
_OPTIMIZER_FACTORY = Pattern(r"(create|build|get|make|init|configure)_?optim", re.I)
# `StepLR`, `CosineAnnealingLR`, `warmup_lr`, `SWALR`; not a model class such as `ResNetSimCLR`
_SCHEDULER = Pattern(r"((?-i:[a-z0-9]LR)|_lr|Scheduler|_schedule_with_warmup|schedule)$|^SWALR$"
                     r"|^(get|create|build)_.*sched", re.I)
# What builds a run's options (`opt = opts.parse_opt()`, `parser.parse_args()`, `TrainOptions().parse()`)
_OPTIONS = Pattern(r"^parse|_args$|^(get|load|read)_?(opts?|options|config|cfg)$", re.I)
_SCALERS = {"GradScaler", "ShardedGradScaler", "NativeScaler", "NativeScalerWithGradNormCount", "ApexScaler"}
# The methods a GradScaler's user calls on it and nothing else has together
_SCALER_USE = frozenset({"scale", "step", "update"})
_EMAS = {"AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3", "EMA", "ExponentialMovingAverage", "EMAModel",
         "LitEma", "KarrasEMA", "PostHocEMA"}

_NAME_RULES: list[tuple[Pattern, Role]] = [
    (Pattern(r"sched", re.I), Role.SCHEDULER),
    (Pattern(r"scaler", re.I), Role.SCALER),
    (Pattern(r"(^|_)ema(_|$|s$|\d)|^swa_model$|averaged_model", re.I), Role.EMA),
    (Pattern(r"accelerator", re.I), Role.ACCELERATOR),
    (Pattern(r"engine", re.I), Role.ENGINE),
    (Pattern(r"optim|(^|_)opts?($|_|\d)|^opt[A-Z]"), Role.OPTIMIZER),
]


# A container of the objects of a role, by its name (`self.optimizers[policy]`, `lr_schedulers[i]`).
_CONTAINER = Pattern(r"(optimi[sz]ers|optims|opts|schedulers|scalers)$", re.I)
# Names followed at most (`a = b`, `b = c`, ..., or a chain of factories) before a role is left unread.
_DEPTH = 4
# What Roles._flow answers for an object of another framework (`paddle.optimizer.Momentum(...)`).
_FOREIGN: Role = object()  # type: ignore[assignment]


@lru_cache(maxsize=4096)  # asked for the same few constructors for every call and name of a file
def role_of_constructor(name: str) -> Role:
    short = last_part(name)
    # (a project's own `optim` package may hold schedulers: nsf's `optim.CosineAnnealingWarmUpLR`)
    if short in _OPTIMIZERS or short.endswith("Optimizer") and short[:1].isupper() or name.startswith(
            ("optim.", "torch.optim.")) and "lr_scheduler" not in name and not _SCHEDULER.search(short):
        return Role.OPTIMIZER
    if "lr_scheduler" in name or _SCHEDULER.search(short):
        return Role.SCHEDULER
    if short in _SCALERS or short.endswith("GradScaler"):
        return Role.SCALER
    if short in _EMAS or short.lower().startswith("modelema"):
        return Role.EMA
    if short == "Accelerator":
        return Role.ACCELERATOR
    if _OPTIMIZER_FACTORY.search(short):
        return Role.OPTIMIZER
    return Role.UNKNOWN


@lru_cache(maxsize=4096)
def role_of_name(name: str) -> Role:
    short = last_part(name)
    for pattern, role in _NAME_RULES:
        if pattern.search(short):
            return role
    return Role.UNKNOWN


@dataclass
class Roles:
    """File-wide table of what each assigned name holds."""

    constructed: dict[str, list[cst.Call]] = field(default_factory=dict)
    prepared: set[str] = field(default_factory=set)  # returned by accelerator.prepare(...)
    # `self._optimizer, self._lr_scheduler = accelerator.prepare(optimizer, lr_scheduler)`: short name ->
    # the names handed to `prepare` at its position
    prepared_from: dict[str, list[str]] = field(default_factory=dict)
    full_names: dict[str, set[str]] = field(default_factory=dict)  # `ema` -> {"self.ema"}: where it is bound
    # `v0, v1 = build(...)`: short name -> (the call, the element's position)
    unpacked: dict[str, list[tuple[cst.Call, int]]] = field(default_factory=dict)
    maybe_none: set[str] = field(default_factory=set)  # short names bound to `GradScaler() if amp else None`
    # shared with the Index: every value a single name is bound to, and the file's functions by name
    values: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    returns: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = field(default_factory=dict)  # `return` values
    methods_called: dict[str, set[str]] = field(default_factory=dict)  # shared with the Index: short name -> methods
    _roles: dict[str, Role] = field(default_factory=dict, repr=False)  # of(name), until the next record()

    def record(self, names: list[str], value: cst.BaseExpression) -> None:
        if type(value) is cst.IfExp:
            self._record_branches(names, value)  # type: ignore[arg-type]
            return
        if not isinstance(value, cst.Call):
            return
        self._roles.clear()
        called = method(value)
        if called is not None and called[1] == "prepare":
            self.prepared.update(last_part(n) for n in names)
            args = value.args
            if len(names) == len(args) and not any(a.star or a.keyword is not None for a in args):
                for name, arg in zip(names, args):
                    if (handed := dotted(arg.value)) is not None and handed != name:
                        self.prepared_from.setdefault(last_part(name), []).append(handed)
            return
        if len(names) == 1:
            self.constructed.setdefault(last_part(names[0]), []).append(value)
            self.full_names.setdefault(last_part(names[0]), set()).add(names[0])

    def _record_branches(self, names: list[str], value: cst.IfExp) -> None:
        """``GradScaler() if amp else None``: each call is a constructor of the name, which may also be None."""
        if len(names) != 1:
            return
        branches: list[cst.BaseExpression] = [value.body, value.orelse]
        while branches:
            branch = branches.pop()
            if type(branch) is cst.IfExp:
                branches += [branch.body, branch.orelse]  # type: ignore[attr-defined]
            elif type(branch) is cst.Call:
                self.record(names, branch)
            elif is_none(branch):
                self.maybe_none.add(last_part(names[0]))

    def record_unpacked(self, names: list[str], value: cst.Call) -> None:
        """``a, b = call(...)``, one plain name per element."""
        self._roles.clear()
        for position, name in enumerate(names):
            self.unpacked.setdefault(last_part(name), []).append((value, position))

    def of(self, name: str | None) -> Role:
        if not name:
            return Role.UNKNOWN
        role = self._roles.get(name)
        if role is None:
            role = self._roles[name] = self._of(name)
        return role

    def _of(self, name: str) -> Role:
        role = self._flow(name, set())
        if role is _FOREIGN:
            return Role.UNKNOWN  # `paddle.optimizer.Momentum(...)`: not torch's, out of scope
        if role is not Role.UNKNOWN:
            return role
        role = role_of_name(name)
        if role is Role.OPTIMIZER and any(_OPTIONS.search(last_part(func_name(c) or ""))
                                          for c in self.constructed.get(last_part(name), [])):
            return Role.UNKNOWN  # `opt = opts.parse_opt()`: the run's options, not an optimizer
        if role is Role.UNKNOWN and _SCALER_USE <= self.methods_called.get(last_part(name), set()):
            # `grad_scalar.scale(loss)`, `grad_scalar.step(opt)`, `grad_scalar.update()` on a parameter whose
            # name says nothing (LSGM/NVAE spell it "scalar"): what is done with it says GradScaler
            return Role.SCALER
        return role

    def _flow(self, name: str, seen: set[str], by_name: bool = True) -> Role:
        """What the file binds ``name`` to says it is (never its own name): UNKNOWN when nothing does.
        ``by_name``: an alias may take the role of the name it copies (``v = self.optimizer``)."""
        short = last_part(name)
        seen.add(short)
        for call in self.constructed.get(short, []):
            role = self._called(call, seen)
            if role is not Role.UNKNOWN:
                return role
        for call, position in self.unpacked.get(short, []):
            role = self._returned(call, position, seen)
            if role is not Role.UNKNOWN:
                return role
        # aliases: one role for every one of them, and no class of the file's building the name as
        # something else (`model = Net()` and, in an evaluation function, `model = self.ema_model`)
        roles = {self._held(v, seen, by_name) for v in self.values.get(short, []) if type(v) is not cst.Call and not is_none(v)}
        if len(roles) != 1 or any(last_part(func_name(c) or "")[:1].isupper() for c in self.constructed.get(short, [])):
            return Role.UNKNOWN
        return roles.pop()

    def _held(self, value: cst.BaseExpression, seen: set[str], by_name: bool = True) -> Role:
        """The role of the object ``value`` is: an alias (``v = self.optimizer``, ``v = w``) or an
        element of a container of optimizers, schedulers or scalers (``v = self.optimizers[k]``)
        takes the role of what it names, by what the file binds that to, else (``by_name``) by that
        name."""
        kind = type(value)
        if kind is cst.Call:
            return self._called(value, seen)  # type: ignore[arg-type]
        if kind is cst.IfExp:
            roles = {self._held(v, seen, by_name) for v in (value.body, value.orelse) if not is_none(v)}  # type: ignore[attr-defined]
            return roles.pop() if len(roles) == 1 else Role.UNKNOWN
        if kind is cst.Subscript:
            container = dotted(value.value)  # type: ignore[attr-defined]
            # `hparams.optimizer_params["lr"]` is a setting, not an optimizer
            return role_of_name(container) if by_name and container and _CONTAINER.search(container) else Role.UNKNOWN
        target = dotted(value)
        if target is None or target in ("None", "True", "False") or last_part(target) in seen or len(seen) > _DEPTH:
            return Role.UNKNOWN
        role = self._flow(target, seen, by_name)
        return role if role is not Role.UNKNOWN or not by_name else role_of_name(target)

    def _called(self, call: cst.Call, seen: set[str]) -> Role:
        """What ``call`` builds: by its constructor's name, else by what the file binds the called name
        to (a class: ``opt_cls = torch.optim.AdamW``; a table of classes), else by what the file's own
        function or method of that name returns."""
        constructor = func_name(call)
        if constructor is None:
            if type(call.func) is cst.Subscript:  # `optim_map[name](params)`
                return self._classes(call.func.value, seen)  # type: ignore[attr-defined]
            return Role.UNKNOWN
        if constructor.split(".", 1)[0] in FOREIGN_FRAMEWORKS:
            return _FOREIGN
        role = role_of_constructor(constructor)
        if role is not Role.UNKNOWN or len(seen) > _DEPTH:
            return role
        short = last_part(constructor)
        if short not in seen:
            held = seen | {short}
            for value in self.values.get(short, []):
                role = self._class(value, held)
                if role is not Role.UNKNOWN:
                    return role
        return self._returned(call, None, seen)

    def _class(self, value: cst.BaseExpression, seen: set[str]) -> Role:
        """The role of what a class held in a name builds: ``torch.optim.AdamW``, either of ``Adam if c
        else SGD``, a table of classes, an optimizer class from a factory (``get_optimizer(cfg)``)."""
        kind = type(value)
        if kind is cst.IfExp:
            roles = {self._class(v, seen) for v in (value.body, value.orelse)}  # type: ignore[attr-defined]
            return roles.pop() if len(roles) == 1 else Role.UNKNOWN
        if kind is cst.Call and last_part(func_name(value) or "") == "partial" and value.args:  # type: ignore[arg-type, attr-defined]
            return self._class(value.args[0].value, seen)  # type: ignore[attr-defined]  # `partial(optim.SGD, momentum=0.9)`
        if kind is cst.Call:  # calling what a factory of optimizers returns builds an optimizer
            return Role.OPTIMIZER if self._called(value, seen) is Role.OPTIMIZER else Role.UNKNOWN  # type: ignore[arg-type]
        if kind is cst.Dict:
            return self._classes(value, seen)
        name = dotted(value)
        return role_of_constructor(name) if name is not None else Role.UNKNOWN

    def _classes(self, table: cst.BaseExpression, seen: set[str]) -> Role:
        """The one role the classes of a table build (``{"adam": optim.Adam, "sgd": optim.SGD}``)."""
        if type(table) is cst.Dict:
            roles = {self._class(e.value, seen) if type(e) is cst.DictElement else Role.UNKNOWN
                     for e in table.elements}  # type: ignore[attr-defined]
        else:
            name = dotted(table)
            if name is None or last_part(name) in seen:
                return Role.UNKNOWN
            held = seen | {last_part(name)}
            roles = {self._classes(t, held) for t in self.values.get(last_part(name), []) if type(t) is cst.Dict}
        return roles.pop() if len(roles) == 1 else Role.UNKNOWN

    def _returned(self, call: cst.Call, position: int | None, seen: set[str]) -> Role:
        """The one role every ``return`` of the file's functions or methods named as ``call`` calls
        them gives (element ``position`` of the tuple they return): ``def build(): opt = AdamW(...);
        return model, opt``."""
        own = own_call_name(call)
        if own is None or own in seen or len(seen) > _DEPTH or own not in self.functions:
            return Role.UNKNOWN
        roles = set()
        for fn in self.functions[own]:
            for value in self.returns.get(fn, ()):
                if value is None or is_none(value):
                    continue
                if position is not None:
                    elements = value.elements if type(value) is cst.Tuple else ()  # type: ignore[attr-defined]
                    if len(elements) <= position or any(type(e) is cst.StarredElement for e in elements):
                        return Role.UNKNOWN
                    value = elements[position].value
                # what the function builds, not what it calls it (`averaged_model = build_model()`)
                roles.add(self._held(value, seen | {own}, by_name=False))
        return roles.pop() if len(roles) == 1 else Role.UNKNOWN

    def constructors(self, name: str | None, role: Role) -> list[cst.Call]:
        """The calls in this file that build ``name`` as a ``role``."""
        if not name:
            return []
        return [c for c in self.constructed.get(last_part(name), [])
                if (n := func_name(c)) is not None and role_of_constructor(n) is role]

    def scheduler_optimizers(self, name: str | None) -> set[str]:
        """The optimizers (short names) the file builds scheduler ``name`` on: empty when unknown."""
        found: set[str] = set()
        for call in self.constructors(name, Role.SCHEDULER):
            args = [a.value for a in call.args if a.keyword is None and not a.star]
            args += [a.value for a in call.args if a.keyword is not None and a.keyword.value == "optimizer"]
            owner = next((dotted(a) for a in args if dotted(a) and self.of(dotted(a)) is Role.OPTIMIZER), None)
            if owner is None:
                return set()  # one constructor we cannot read: any optimizer
            found.add(last_part(owner))
        return found

    def is_prepared(self, name: str | None) -> bool:
        return bool(name) and last_part(name) in self.prepared  # type: ignore[arg-type]


def is_accelerator_call(expr: cst.BaseExpression, roles: Roles) -> bool:
    base = dotted(expr)
    return base is not None and roles.of(base) is Role.ACCELERATOR
