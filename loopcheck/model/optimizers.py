"""Which optimizer holds which module's parameters, and whose gradients a zeroing clears.

A GAN steps two optimizers in one iteration and zeroes each through its own module
(``netD.zero_grad()`` before ``optimizerD.step()``): a zeroing counts for the optimizers it clears,
as far as the file shows it, and for any optimizer where the file does not say.

>>> import libcst as cst
>>> from loopcheck.model import build
>>> m = build(cst.parse_module("opt_d = torch.optim.Adam(disc.parameters())\\n"))
>>> optimizer_modules(m)
{'opt_d': {'disc'}}
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.events import Event, Loop
from loopcheck.model.roles import Role, role_of_constructor, role_of_name
from loopcheck.model.syntax import dotted, func_name, last_part, method, param_names, source, walk

if TYPE_CHECKING:
    from loopcheck.model import FileModel


def parameter_owners(call: cst.Call) -> set[str]:
    """The modules whose ``.parameters()`` (or ``.named_parameters()``) a call reads; ``layers[]`` for
    an element of a list of modules a name picks (``self.bias_layers[inc_i].parameters()``)."""
    found = set()
    for node in walk(call):
        called = method(node) if type(node) is cst.Call else None  # type: ignore[arg-type]
        if called is None or called[1] not in ("parameters", "named_parameters"):
            continue
        owner = called[0]
        if type(owner) is cst.Subscript and dotted(owner.value):  # type: ignore[attr-defined]
            from loopcheck.model.memory import module_name  # (memory reads this module)

            element = module_name(source(owner))
            if element.endswith("[]"):
                found.add(element)  # one of a list a name picks: `self.bias_layers[i]` (not a dict's entry)
        elif dotted(owner):
            found.add(dotted(owner))  # type: ignore[arg-type]
    return found


def optimizer_modules(model: FileModel) -> dict[str, set[str]]:
    """Optimizer (its short name) -> the modules whose ``.parameters()`` the file builds it over
    (read once per file; not to be changed by the caller)."""
    known = model.read_once.get("optimizer_modules")
    if known is None:
        known = model.read_once["optimizer_modules"] = _optimizer_modules(model)
    return known  # type: ignore[return-value]


def _optimizer_modules(model: FileModel) -> dict[str, set[str]]:
    from loopcheck.model.memory import module_name

    found: dict[str, set[str]] = {}
    stored: dict[int, dict[str, str]] | None = None
    for name, calls in model.index.roles.constructed.items():
        for call in calls:
            role = role_of_constructor(func_name(call) or "")
            owners = {module_name(m) for m in parameter_owners(call)} \
                if role is Role.OPTIMIZER or role is Role.UNKNOWN and role_of_name(name) is Role.OPTIMIZER else set()
            # (an optimizer class the run's options choose, `args.optimizer(self.encoder.parameters())`,
            # holds what it is built over as well)
            if role is Role.OPTIMIZER or owners:
                if stored is None:
                    stored = _stored_parameters(model)
                # `self.optD = Adam(discriminator.parameters())` in an `__init__` that keeps
                # `self.discriminator = discriminator`: the methods zero it as `self.discriminator`
                owners |= {f"{stored[id(call)][head]}{rest}" for o in owners
                           for head, dot, rest in [o.partition(".")] if head in stored.get(id(call), {})
                           for rest in [dot + rest]}
                found.setdefault(name, set()).update(owners)
    held = _held(model, set().union(*found.values())) if found else {}
    return {name: owners | {m for o in owners for m in held.get(o, ())} for name, owners in found.items()}


def _held(model: FileModel, containers: set[str]) -> dict[str, set[str]]:
    """``trainable = nn.ModuleList(); trainable.append(cnn)``: the modules the file puts into each of
    ``containers`` (``append``, ``extend`` of a literal list, ``add_module``), whose parameters are
    the container's."""
    from loopcheck.model.memory import module_name

    found: dict[str, set[str]] = {}
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] not in ("append", "extend", "add_module") or not call.args:
            continue
        container = dotted(called[0])
        if container is None or module_name(container) not in containers:
            continue
        value = call.args[-1].value
        items = [e.value for e in value.elements] if called[1] == "extend" and type(value) in (cst.List, cst.Tuple) \
            else [value] if called[1] != "extend" else []  # type: ignore[attr-defined]
        found.setdefault(module_name(container), set()).update(module_name(n) for i in items if (n := dotted(i)))
    return found


def _stored_parameters(model: FileModel) -> dict[int, dict[str, str]]:
    """For each call in an ``__init__`` of the file: its parameters stored whole on the object
    (``self.discriminator = discriminator``), by parameter name."""
    from loopcheck.model.stored import stored_whole

    found: dict[int, dict[str, str]] = {}
    for init in model.index.functions.get("__init__", []):
        kept = stored_whole(init)
        if kept:
            found.update((id(node), kept) for node in walk(init.body) if type(node) is cst.Call)
    return found


class Zeroing:
    """Answers "does this zeroing clear the gradients ``optimizer`` steps with?" for one file."""

    def __init__(self, model: FileModel, stepped: set[str]) -> None:
        self.owners = {k: v for k, v in optimizer_modules(model).items() if v}
        self.stepped = {last_part(s) for s in stepped}  # the optimizers the loop steps
        # Last parts that two stepped optimizers share (`self.generator.optimizer` and
        # `self.discriminator.optimizer`, each submodule owning one): told apart by their full path
        # (an owner's path each, not `self`: `optimizer` and `self.optimizer` may be one object)
        self.full = {s for s in stepped if s.rpartition(".")[0] not in ("", "self")}
        self.shared = {p for p in self.stepped if sum(last_part(s) == p for s in self.full) > 1}
        self.roles = model.index.roles
        self.values = model.index.values
        self.model = model
        self._own: set[str] | None = None  # `obj.optimizer` that a class of obj builds for itself (read when asked)

    def clears(self, zero: Event, step: Event) -> bool | None:
        """True: certainly clears the gradients ``step``'s optimizer applies; False: it certainly clears
        another optimizer's gradients only; None: unknown."""
        from loopcheck.model.memory import module_name

        zero = self.as_called(zero)
        optimizer = step.optimizer and (self._argument(step.origin, step.loop, step.order, step.optimizer)
                                        or step.optimizer)
        if not zero.receiver or not optimizer:
            return None
        mine = last_part(optimizer)
        if zero.target == "optimizer":
            zeroed = last_part(zero.receiver)
            if zero.receiver != optimizer and zero.receiver in self.own_optimizers():
                return False  # `architect.optimizer.zero_grad()`: the optimizer the Architect builds for itself
            if mine in self.shared and optimizer in self.full:
                if zero.receiver == optimizer:
                    return True
                return False if zero.receiver in self.full else None
            if zeroed == mine:
                return True
            return False if zeroed in self.stepped else None
        if zero.target != "model":
            return None  # `p.grad = None`, `zero_grad(params)`: whose parameters is not visible
        module = module_name(zero.receiver)
        if mine in self.shared and optimizer in self.full and self.owners.get(mine) == {"self"}:
            # `self.optimizer = Adam(self.parameters())` in the submodules' class: `self.generator.optimizer`
            # steps `self.generator`'s parameters, `self.discriminator.optimizer` the discriminator's
            if _overlaps(module, {optimizer.rpartition(".")[0]}):
                return True
            others = {o.rpartition(".")[0] for o in self.full if last_part(o) == mine and o != optimizer}
            return False if _overlaps(module, others) else None
        if _overlaps(module, self.owners.get(mine, set())):
            return True
        others = [mods for opt, mods in self.owners.items() if opt != mine and opt in self.stepped]
        if mine in self.owners and any(_overlaps(module, mods) for mods in others):
            return False  # `netG.zero_grad()` clears the generator's optimizer, not the discriminator's
        if mine in self.owners and all(self._apart(module, owner) for owner in self.owners[mine]):
            return False  # a half-precision copy zeroed after its gradients went to the stepped fp32 model
        return None

    def own_optimizers(self) -> set[str]:
        if self._own is None:
            from loopcheck.model.stored import own_optimizers

            self._own = own_optimizers(self.model)
        return self._own

    def covered(self, optimizer: str, zeros: list[Event]) -> bool:
        """An optimizer built over other modules' ``.parameters()`` and nothing else (infoGAN's
        ``Adam(chain(G.parameters(), D.parameters()))`` beside ``G_optimizer`` and ``D_optimizer``), where
        every one of those modules is cleared on each iteration by an unconditional zeroing (its own
        optimizer's or the module's): nothing the optimizer steps with adds up across iterations."""
        from loopcheck.model.memory import module_name

        mine = last_part(optimizer)
        owners = self.owners.get(mine)
        calls = self.roles.constructed.get(mine, [])
        if not owners or not calls or not all(_only_parameters(_params_argument(c)) for c in calls):
            return False
        cleared: set[str] = set()
        for zero in zeros:
            zero = self.as_called(zero)
            if zero.conds or not zero.receiver:
                continue
            if zero.target == "model":
                cleared.add(module_name(zero.receiver))
            elif zero.target == "optimizer" and last_part(zero.receiver) != mine:
                cleared |= self.owners.get(last_part(zero.receiver), set())
        return all(any(o == c or o.startswith(c + ".") for c in cleared) for o in owners)

    def _apart(self, module: str, owner: str) -> bool:
        """``gpu_model`` and ``cpu_model`` each built by a call of its own that names nothing of the other
        (``gpu_model = GPT2LMHeadModel.from_pretrained(name).half().to("cuda")``, ``cpu_model =
        GPT2LMHeadModel.from_pretrained(name)``), every binding of each: two modules that share no
        parameter. A wrapper (``model = DDP(net)``), a part (``enc = model.encoder``) or a copy made
        from the other names it; a name bound elsewhere than by a call (a parameter) is unknown."""
        if "." in module or "." in owner or module == owner:
            return False
        mine, theirs = self.values.get(module), self.values.get(owner)
        if not mine or not theirs:
            return False
        if not all(isinstance(v, cst.Call) for v in (*mine, *theirs)):
            return False
        return not any(module in _names(v) for v in theirs) and not any(owner in _names(v) for v in mine)

    def partial(self, zero: Event, step: Event) -> bool:
        """``model.codebook.zero_grad()`` where ``step``'s optimizer is built over all of ``model``: one
        part's gradients cleared on purpose (VQ-VAE trains its codebook by the VQ loss alone, data2vec's
        EMA teacher takes no gradient step); the rest keep theirs."""
        from loopcheck.model.memory import module_name

        if zero.target != "model" or not zero.receiver or not step.optimizer:
            return False
        module = module_name(zero.receiver)
        if module.endswith(".module"):
            return False  # `model.module`: the whole model inside its DDP wrapper
        return any(module.startswith(owner + ".") for owner in self.owners.get(last_part(step.optimizer), ()))

    def as_called(self, zero: Event) -> Event:
        """A zeroing in a same-file helper on one of its parameters (``def reset_grad(opt): opt.zero_grad()``),
        as its caller wrote it (``reset_grad(optimizer_d)``): the receiver is the argument the call bound."""
        if not zero.receiver or zero.target not in ("optimizer", "model"):
            return zero
        name = self._argument(zero.origin, zero.loop, zero.order, zero.receiver)
        if name is None:
            return zero
        target = "optimizer" if self.roles.of(name) in (Role.OPTIMIZER, Role.ENGINE) else "model"
        return replace(zero, receiver=name, target=target)

    @staticmethod
    def _argument(fn: cst.FunctionDef | None, loop: Loop | None, order: int, name: str) -> str | None:
        """``name`` (``opt``, ``opt.inner``) where its head is a parameter of the same-file function ``fn``
        that holds it, as the call inlining ``fn`` bound it (``train(model, loader, optimizer)`` for
        ``def train(net, loader, train_optimizer)``): a zeroing and a step of one epoch function name
        the optimizer by its parameter, and a helper's zeroing by its own. None where the file shows
        no such call."""
        head, _, rest = name.partition(".")
        if fn is None or head == "self" or head not in param_names(fn.params):
            return None
        while loop is not None:
            bound = [a for a in loop.assignments_before(head, order) if isinstance(a.node, cst.Call)]
            if bound:
                argument = dotted(bound[-1].value)
                if argument is None:
                    return None
                return f"{argument}.{rest}" if rest else argument
            loop = loop.parent
        return None


def _params_argument(call: cst.Call) -> cst.BaseExpression | None:
    """What an optimizer constructor is given to step: ``params=`` or its first argument."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "params":
            return arg.value
    first = call.args[0] if call.args else None
    return first.value if first is not None and first.keyword is None and not first.star else None


def _only_parameters(expr: cst.BaseExpression | None) -> bool:
    """``m.parameters()``, or lists, chains, sums and parameter groups of them, and nothing else: no
    tensor of its own (``[latent] + list(G.parameters())``), no filtered or named selection."""
    if isinstance(expr, cst.Call):
        name = last_part(func_name(expr) or "")
        if name == "parameters" and isinstance(expr.func, cst.Attribute) and dotted(expr.func.value) and not expr.args:
            return True
        if name in ("chain", "list", "tuple") and expr.args:
            return all(a.keyword is None and not a.star and _only_parameters(a.value) for a in expr.args)
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _only_parameters(expr.left) and _only_parameters(expr.right)
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        return all(isinstance(e, cst.Element) and _only_parameters(e.value) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        groups = [e.value for e in expr.elements if isinstance(e, cst.DictElement)
                  and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == "params"]
        return len(groups) == 1 and _only_parameters(groups[0])
    return False


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def _overlaps(module: str, modules: set[str]) -> bool:
    """``model`` and ``model.head`` share parameters; ``netD`` and ``netG`` do not."""
    return any(m == module or m.startswith(module + ".") or module.startswith(m + ".") for m in modules)
