"""What an object in a training loop is: optimizer, scheduler, GradScaler, EMA, engine, ...

``QualifiedNameProvider`` cannot answer this (``opt.step()`` is just ``opt.step`` to it), so the
file's own assignments decide (``opt = torch.optim.AdamW(...)``), and the variable's name decides
when the file does not construct the object itself (``self.lr_scheduler.step()``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst

from loopcheck.model.syntax import dotted, func_name, last_part, method


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
               "Adam8bit", "ZeroRedundancyOptimizer", "FusedAdam", "FusedLAMB", "Muon", "Shampoo", "SAM"}
_OPTIMIZER_FACTORY = re.compile(r"(create|build|get|make|init|configure)_?optim", re.I)
_SCHEDULER = re.compile(r"(LR|Scheduler|_schedule_with_warmup|schedule)$|^(get|create|build)_.*sched", re.I)
_SCALERS = {"GradScaler", "ShardedGradScaler", "NativeScaler", "NativeScalerWithGradNormCount", "ApexScaler"}
_EMAS = {"AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3", "EMA", "ExponentialMovingAverage", "EMAModel",
         "LitEma", "KarrasEMA", "PostHocEMA"}

_NAME_RULES: list[tuple[re.Pattern[str], Role]] = [
    (re.compile(r"sched", re.I), Role.SCHEDULER),
    (re.compile(r"scaler", re.I), Role.SCALER),
    (re.compile(r"(^|_)ema(_|$|s$|\d)|^swa_model$|averaged_model", re.I), Role.EMA),
    (re.compile(r"accelerator", re.I), Role.ACCELERATOR),
    (re.compile(r"engine", re.I), Role.ENGINE),
    (re.compile(r"optim|(^|_)opts?($|_|\d)|^opt[A-Z]"), Role.OPTIMIZER),
]


@lru_cache(maxsize=4096)  # asked for the same few constructors for every call and name of a file
def role_of_constructor(name: str) -> Role:
    short = last_part(name)
    if short in _OPTIMIZERS or name.startswith(("optim.", "torch.optim.")) and "lr_scheduler" not in name:
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
    full_names: dict[str, set[str]] = field(default_factory=dict)  # `ema` -> {"self.ema"}: where it is bound
    _roles: dict[str, Role] = field(default_factory=dict, repr=False)  # of(name), until the next record()

    def record(self, names: list[str], value: cst.BaseExpression) -> None:
        if not isinstance(value, cst.Call):
            return
        self._roles.clear()
        called = method(value)
        if called is not None and called[1] == "prepare":
            self.prepared.update(last_part(n) for n in names)
            return
        if len(names) == 1:
            self.constructed.setdefault(last_part(names[0]), []).append(value)
            self.full_names.setdefault(last_part(names[0]), set()).add(names[0])

    def of(self, name: str | None) -> Role:
        if not name:
            return Role.UNKNOWN
        role = self._roles.get(name)
        if role is None:
            role = self._roles[name] = self._of(name)
        return role

    def _of(self, name: str) -> Role:
        for call in self.constructed.get(last_part(name), []):
            constructor = func_name(call)
            if constructor and constructor.split(".", 1)[0] in FOREIGN_FRAMEWORKS:
                return Role.UNKNOWN  # `paddle.optimizer.Momentum(...)`: not torch's, out of scope
            role = role_of_constructor(constructor) if constructor else Role.UNKNOWN
            if role is not Role.UNKNOWN:
                return role
        return role_of_name(name)

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
