"""## What it does
Checks for `model.eval()` (or `model.train(False)`, `model.train(mode=False)`) inside a training
loop, directly or in an evaluation helper of the same file that the loop calls, that is not undone
by `model.train()` before the loop's next training step. A mode helper's branch for another mode
(`if mode == 'eval': m.eval()` in `set_mode('train', models)`) never runs; an evaluation method that
takes the model from its own object (`model = self.model; model.eval()`) switches the module a
`train()` method trains as `model = self.model`; a local that the training function binds once,
to an attribute (`model = context.model`, `model = self.model`), is that attribute, so an inline
`model.eval()` and a helper handed `context.model` both switch the module it trains. A module counts as trained where its parameters
(or those of two or more of its parts: `model.encoder`, `model.segmenter`) go to an optimizer, also one built by a call that is no torch constructor (`getattr(optim,
args.optim)(model.parameters())`, `set_optimizer(opt, model)`), or where `train()` is called on it;
not where its only optimizer is built with `lr=0` in a file that calls apex's `amp.initialize` (CMC
and MoCo build `SGD(model_ema.parameters(), lr=0, ...)` only so apex casts the momentum encoder).

It stays silent where eval mode changes nothing: eval mode only affects layers that read
`self.training` (dropout, BatchNorm, spectral norm, ...), so a model whose every layer the file,
or a project module it imports, shows to be mode-free (`nn.Linear`, `nn.Conv2d`, `nn.LayerNorm`,
an RNN without dropout, an `InstanceNorm2d` without `track_running_stats=True`, a dropout whose
rate every construction leaves at 0, a weight-normalised convolution, also where the norm class is
handed down through constructor parameters or the blocks come from a module that module imports)
trains the same in both modes; where the only such layers are dropouts whose rate is an option
the file leaves at 0 (`F.dropout(x, p=self.dropout, training=self.training)` built with
`args.dropout`, `--dropout` defaulting to 0.0), the finding says so: "(only when `args.dropout` > 0;
its default is 0.0)". A diffusers `UNet2DConditionModel` trains the same in both modes too, unless the file adds an adapter with dropout. A model it cannot see (a hub
checkpoint, a torchvision constructor, a module passed in) counts as one that has such layers.
It also ignores `eval()` on a `deepcopy` of the model or on a network an evaluation helper builds
for itself (`net = Net(cfg); net.load_state_dict(weights); net.eval()`, even where the trained
model is also called `net`), `eval()` written at the top of every training iteration right before
that module's own forward, backward and step with no evaluation in between, also at the top of every
epoch before the batch loop that trains it (a backbone trained with its pretrained BatchNorm
statistics on purpose, a PPO policy update with dropout off, a frozen encoder under a linear probe; a DeepSpeed
engine's `engine.step()` in a branch beside the optimizer's step reads as that step, and a loop over
the model's parameters summing a gradient norm is no evaluation), and backward passes that train nothing (a
Grad-CAM backward that no optimizer step follows, a step whose loss was computed before the
`eval()` (the evaluation runs between the forward and the step, and the next iteration calls
`model.train()` before its forward), a shared epoch helper's backward under
`if mode == "train":` called with `"val"`, or under `if optimizer:` called with `None`, or one that
back-propagates and steps only `if model.training:` (or `if mode == "train":` with `mode = "train" if
model.training else "val"`), called after `model.eval()` for validation, in a branch or not: it updates nothing there, and the next update that runs decides), nor an
`eval()` under `if not train` in a loop whose updates run under `if train`, a flag the loop never
rebinds (an epoch helper serving training and validation: each run of it does one or the other).
Nor an `eval()` under a flag the training function sets before its loop and nothing in the loop sets
again (`self.is_test = False` at the top of a DQN agent's `train()`, its action helper's `if
self.is_test: self.dqn.eval()`), nor one on the last iteration of the batch loop only (`if i ==
len(loader) - 1:`, an end-of-epoch evaluation; or on the last epoch only, `if epoch == args.n_epochs - 1:`
in `for epoch in range(args.n_epochs):`) where the loop around it calls `model.train()` before it runs
that loop again (the next epoch's batch loop, the next task's epochs).
Nor is a loop in a pytest test (a `test_*` function of a file pytest collects, as LC103 reads it): a
test that switches modes between its steps checks a property of a few steps and trains no model that
is used afterwards.
Opt-in in `loopcheck check` (`--extend-select LC605`); on by default in `loopcheck run`, which sees
the modules and the mode at each backward. Whether a leak matters, and whether train mode comes
back before the next update, depends on code a file rarely shows: the model's layers (a flow model
subclassing `nn.Sequential`, a generator with only InstanceNorm built two imports away or handed in)
and the way back to train mode (a helper's parameter, the loop around the loop, an object holding the
model). In fifteen outside reviews of code nobody on the project had read (`benchmarks/results/`
`fresh-precision-s19.md` to `-s26c.md`), 9 of its 64 findings were true (3 of 41 in the last nine), and
each round of fixes left new false ones in the next sample; on the labelled real-world benchmark 6 of
its 9 were.

## Why is this bad?
Only the first epoch (or the steps before the first evaluation) trains in training mode. After
that, dropout is off and BatchNorm normalises with its running statistics and stops updating
them: the model trains as a different network than intended, usually worse, and nothing fails.
`model.train()` at the start of the epoch loop, inside the training helper (also an epoch function
of another module that starts with `model.train()` before its backward and steps, or through an
object that holds the model: `d_net.s_net.train()` where `d_net = Distiller(t_net, s_net)` and the
class, of the file or of a project module, keeps `self.s_net = s_net`, or `d_net.train()` itself,
which switches every submodule; or through a method of the
file's class that calls `self.train()` or `self.classifier_head.train()`: `discriminator.train_custom()`
puts that part back in train mode), or right after the evaluation is correct and not flagged; so
is a model built anew before its next update (`model = GPT4TS(args)` at the top of each repeated run:
a new module starts in train mode); so is `.eval()` on a model that is not trained here (a
frozen teacher, an EMA copy; also, where the file shows no optimizer's modules, one the loop's own code runs
only under `torch.no_grad()`, as ENAS's controller step runs the shared network for its reward) or that
the code freezes (`requires_grad_(False)`), an `eval()` inside a loop whose function
already puts that module in eval mode before the loop and never back in train mode in it (an
architecture controller's loop that scores the generator through `get_is(gen_net)`: every iteration
runs with the generator in eval mode anyway), and a GAN's
discriminator put in eval mode for the generator's update, as long as it is back in train mode
(itself or through its DDP wrapper) before its own optimizer steps. The same holds for a component
put in eval mode after its own updates while one training helper goes on to train the next
component with the optimizer handed to it (a world model trained on a frozen tokenizer's codes).
Where the optimizers' parameters are not in the file, a module's optimizers are those stepped while
the loop has put it in train mode: branches put in eval mode after their epoch's training while a
second optimizer fits only fusion weights over them, with `train()` again at the next epoch's top,
are not flagged (a step of the branches' own optimizer in eval mode still is). Nor is a loop all of whose
optimizers are built over other modules (co-training: `train(net1, net2, optimizer1)` evaluates the
peer `net2` while `optimizer1 = SGD(net1.parameters())` trains `net1`; the call that trains `net2`
puts it back in train mode first): the loop around it decides, where the peer's own update runs (BiC's
stage 1 steps the backbone with the bias layers in eval mode, its stage 2 steps a bias layer,
`Adam(self.bias_layers[inc_i].parameters())`, with the backbone in eval mode: each stage puts its own
module back in train mode first; an element of a list a name picks stands for the list, one a literal
index picks, `convnets[-1]`, for itself). An optimizer is the one its step's own function binds: two
helpers that each call theirs `optimizer` (an auxiliary net's, then the classifier's) train different modules,
and a helper's parameter names its argument only within its call (NAO's `nao_infer(queue, nao)` and
`nao_train(queue, nao, nao_optimizer)` call the controller `model`: the child's `optimizer` over the
main `model` is not the controller's, and `nao_train`'s `model.train()` puts the controller back).
A loop that makes a tensor it binds require grad and steps no optimizer (Langevin dynamics on the inputs
of a frozen energy model, an attack) trains nothing.

## Fix
Call `model.train()` after the evaluation (or at the start of every epoch / training helper).
`--fix --unsafe-fixes` puts `model.train()` first in the loop body: unsafe, because it also puts
back into train mode submodules the code may keep in eval mode on purpose (a frozen backbone).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import libcst as cst

from loopcheck.fixes import Fix, insert_before
from loopcheck.model import Assignment, Cond, Event, FileModel, Framework, Kind, Loop
from loopcheck.model.guards import GuardKind, GuardReader, exclusive
from loopcheck.model.memory import frozen_modules, module_name, trained_modules
from loopcheck.model.modes import inert_unless
from loopcheck.model.optimizers import optimizer_modules, parameter_owners
from loopcheck.model.pytest_tests import in_pytest_test
from loopcheck.model.stored import attribute_aliases
from loopcheck.model.values import option_defaults
from loopcheck.model.variants import ruled_out, within
from loopcheck.model.syntax import children, conjuncts, dotted, func_name, last_part, lines, names_in, positional, source, walk
from loopcheck.patterns import Pattern
from loopcheck.rules._base import Rule, Violation


class EvalModeLeak(Rule):
    code = "LC605"
    fixable = True
    message = "model.eval() in the training loop is never undone by model.train() before the next training step"
    # no text pre-filter of its own: the eval() may sit in an evaluation helper of another module

    VALID = [
        """
for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = evaluate(model, val_loader)
""",
        """
def validate(net, loader):
    net.eval()
    with torch.no_grad():
        total = sum(criterion(net(x), y).item() for x, y in loader)
    net.train()
    return total

model.train()
for step, (x, y) in enumerate(train_loader):
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    if step % 1000 == 0:
        validate(model, val_loader)
""",
        """
teacher.eval()
for x, y in loader:
    teacher.eval()
    with torch.no_grad():
        soft = teacher(x)
    loss = distill(student(x), soft, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
for epoch in range(epochs):
    for step, (x, real) in enumerate(loader):
        if phase == "G":
            generator.train()
            discriminator.eval()
            g_loss = -discriminator(generator(x)).mean()
            g_loss.backward()
            g_opt.step()
            phase = "D"
        else:
            generator.eval()
            discriminator.train()
            d_loss = hinge(discriminator(real), discriminator(generator(x).detach()))
            d_loss.backward()
            d_opt.step()
            phase = "G"
""",
        """
for epoch in range(epochs):
    net.train()
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        criterion(net(x), y).backward()
        optimizer.step()
        if (i + 1) % checkpoint_every == 0:
            net.eval().cpu()
            torch.save(net.state_dict(), f"ckpt_{epoch}_{i}.pth")
            net.to(device).train()
""",
        """
for epoch in range(epochs):
    model.eval()
    model.head.train()
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
def run_batch(batch):
    loss = criterion(model(batch.x), batch.y)
    if loss.requires_grad:
        loss.backward()
    return loss.item()

for step in range(max_steps):
    optimizer.zero_grad()
    run_batch(next(train_batches))
    optimizer.step()
    if step % eval_every == 0:
        with torch.no_grad():
            model.eval()
            run_batch(next(val_batches))
            model.train()
""",
        """
text_encoder.requires_grad_(False)
optimizer = torch.optim.AdamW(itertools.chain(unet.parameters(), text_encoder.parameters()))
for epoch in range(epochs):
    unet.train()
    for batch in loader:
        text_encoder.eval()
        loss = F.mse_loss(unet(batch["x"], text_encoder(batch["ids"])), batch["y"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """
opt_d = torch.optim.Adam(discriminator.parameters())
opt_g = torch.optim.Adam(generator.parameters())
ddp_disc = DDP(discriminator, device_ids=[rank])
for real in loader:
    discriminator.eval()
    opt_g.zero_grad()
    F.softplus(-ddp_disc(generator(z))).mean().backward()
    opt_g.step()
    ddp_disc.train()
    opt_d.zero_grad()
    (F.softplus(ddp_disc(generator(z).detach())).mean() + F.softplus(-ddp_disc(real)).mean()).backward()
    opt_d.step()
""",
    ]
    INVALID = [
        """
def run_epoch(loader, validate=False):
    for x, y in loader:
        loss = criterion(model(x), y)
        if not validate:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

model.train()
for epoch in range(epochs):
    run_epoch(train_loader)
    model.eval()  # LC605
    run_epoch(val_loader, validate=True)
""",
        """
opt_d = torch.optim.Adam(discriminator.parameters())
opt_g = torch.optim.Adam(generator.parameters())
for real in loader:
    discriminator.eval()  # LC605
    opt_g.zero_grad()
    F.softplus(-discriminator(generator(z))).mean().backward()
    opt_g.step()
    opt_d.zero_grad()
    (F.softplus(discriminator(generator(z).detach())).mean() + F.softplus(-discriminator(real)).mean()).backward()
    opt_d.step()
""",
        """
model.train()
for epoch in range(epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    model.eval()  # LC605
    with torch.no_grad():
        accuracy = evaluate(model, val_loader)
""",
        """
def evaluate(net, loader):
    net.eval()  # LC605
    with torch.no_grad():
        return sum(criterion(net(x), y).item() for x, y in loader)

optimizer = torch.optim.AdamW(model.parameters())
for step, (x, y) in enumerate(train_loader):
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    if step % 1000 == 0:
        evaluate(model, val_loader)
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        trained = trained_modules(model) - frozen_modules(model)
        owners = optimizer_modules(model)
        for loop in model.loops():
            # with the leaks an inner loop left to this one (it trains only other modules)
            evals = loop.events(Kind.EVAL_MODE) + _left_to(loop, owners, model)
            if not evals or in_pytest_test(model, loop):
                continue  # a unit test's few steps check a property; it trains no model used afterwards
            events = loop.events(deep=True)
            # a backward under no_grad never runs (a helper shared by training and validation), nor
            # one behind `if mode == "train":` in a helper called with `"val"`
            backwards = [e.order for e in events if e.kind is Kind.BACKWARD and not e.in_context("no_grad")
                         and not _dead(e, loop)]
            # the steps are the training; a backward that no step follows (a Grad-CAM in the
            # evaluation helper) trains nothing
            steps = [e.order for e in events if e.kind is Kind.STEP and not _dead(e, loop)]
            if not backwards or not steps and _input_gradients(loop):
                continue  # (Langevin sampling or an attack: the gradients are the inputs', nothing is trained)
            # what the trained modules are called where the loop starts (`model = self.model`)
            aliases = {r for t in trained if (r := _resolve(t, loop, loop.order)) is not None}
            # ... and those of them a local bound once to it stands for (`model = context.model`): that
            # attribute is the trained module, where the loop's code calls the local's eval() or a helper
            # is handed the attribute itself (`predict(context.model)`)
            # (one walk of the function, where a leak's module is an attribute none of the trained names is)
            attributes: dict[str | None, str] | None = None

            def aliased() -> dict[str | None, str]:
                nonlocal attributes
                if attributes is None:
                    attributes = {r: t for t in sorted(_attribute_aliases(trained, loop))
                                  if (r := _resolve(t, loop, loop.order)) is not None}
                return attributes

            for leak in evals:
                if _dead(leak, loop, at_call=True):
                    continue  # `if mode == "eval": m.eval()` in a mode helper called with "train"
                name = _resolve(leak.receiver, leak.loop or loop, leak.order)
                if name not in trained and not (name is not None and "." in name and name in aliased()
                                                and _names_the_attribute(leak, loop, name)) \
                        and not (name in aliases and _takes_own_module(leak, loop)) \
                        or _built_in_helper(leak, loop):
                    continue  # a frozen teacher, an EMA copy, a submodule: may stay in eval mode
                if _kept_in_eval(leak, name, events, loop):
                    continue  # `gen_net.eval()` before a controller's loop: every iteration runs in eval mode
                if _teacher_only(name, owners, loop):
                    continue  # SCHP's averaged model: no optimizer's, forwarded only under no_grad for soft labels
                if _alternating(leak, name, events, loop):
                    continue  # `if phase == "G": G.train(); D.eval() else: G.eval(); D.train()`
                if _trains_others_only(name, owners, events, loop, leak.order, steps, model):
                    continue  # co-training: the peer is evaluated while this loop trains the other network
                updates = [u for u in _updates_of(name, owners, events, loop, leak.order) if u in steps] \
                    or _stepped_in_train_mode(name, events, loop, steps) or steps or backwards
                # `model.eval()` then `step(val_loader, model, ...)`, a helper that steps only `if
                # model.training:`: those updates do not run after the leak (the next that does decides)
                updates = [u for u in updates if u not in _skipped_in_eval(leak, name, events, loop)] or updates
                if _one_or_the_other(leak, updates, events, loop):
                    continue  # `if not train: apply_model(model)` ... `if train: step()`: a run validates or trains
                if _evaluated_again(leak, name, evals, updates, loop, events):
                    continue  # one finding per leak: the last eval() before the next update reports it
                if _trains_in_eval_mode(leak, name, owners, steps, loop, events):
                    continue  # `for x in loader: model.eval(); loss = f(model(x)); ...; opt.step()`: on purpose
                if self._undone(leak, name, events, updates, loop, trained, model):
                    continue
                if _last_pass_undone(leak, name, loop, model):
                    continue  # `if i == len(loader) - 1: model.eval()`, and `model.train()` opens the next epoch
                inert = inert_unless(model, name)
                if inert is None or inert:
                    # the module as the loop's code calls it (`model` for `model = context.model`)
                    shown = aliased().get(name, name)
                    # `train()` first in the body helps only where no update follows the leak in the iteration
                    fix = _train_first(loop, shown) if not any(u > leak.order for u in updates) \
                        and not _helper_local(name, leak, loop) else None
                    elsewhere = model.project.where(leak.node) if model.project is not None else None
                    what = (f"`{source(leak.node.func)}(...)` ({elsewhere}) leaves `{leak.receiver}` in eval mode"
                            if elsewhere and isinstance(leak.node, cst.Call) else f"`{source(leak.node)}` runs")
                    # the layers eval mode changes: only dropouts where the file shows the module; else unknown
                    effect = "dropout off" if inert else "dropout off, BatchNorm frozen, where it has them"
                    yield self.at(leak, f"{what} inside the training loop and nothing calls `{shown}.train()` before "
                                        f"the next training step: from then on it trains in eval mode ({effect})"
                                        f"{_only_when(model, inert)}", fix if not elsewhere else None)

    @staticmethod
    def _undone(leak: Event, name: str, events: list[Event], updates: list[int], loop: Loop,
                trained: set[str], model: FileModel) -> bool:
        """Whether ``name.train()`` runs between the leak and the next update that trains ``name``,
        also as an attribute that holds it (``d_net.s_net.train()`` where ``d_net = Distiller(t_net,
        s_net)`` keeps ``self.s_net = s_net``)."""
        later = _later(leak, updates, events, loop)
        if later:
            def window(order: int) -> bool:
                return leak.order < order < min(later)
        else:
            def window(order: int) -> bool:  # wraps around to the next iteration
                return order > leak.order or order < min(updates)
        if any(a.names == (name,) and window(a.order) and _built_anew(a.value, name) for a in loop.assignments):
            return True  # `model = GPT4TS(args)` at the top of each run: a module built anew is in train mode
        for train in events:
            if train.kind is Kind.TRAIN_MODE and window(train.order) and not _dead(train, loop, at_call=True):
                # (from the loop it runs in: a helper called in an inner loop binds its parameter there)
                resolved = _resolve(train.receiver, train.loop or loop, train.order)
                # (what the file's objects keep is read only where a name needs it: it walks the classes)
                if resolved is not None and resolved != name and resolved.count(".") == 1:
                    resolved = attribute_aliases(model).get(resolved, resolved)
                if resolved is None or resolved == name or resolved not in trained:
                    return True  # the same model, or one we cannot tell apart from it
                if any(kept == name and holder.rsplit(".", 1)[0] == resolved
                       for holder, kept in attribute_aliases(model).items()):
                    return True  # `explainer.train()` where `explainer = ExplainModule(model=model)` keeps it
                if resolved.startswith(name + ".") or name.startswith(resolved + "."):
                    return True  # `model.eval(); model.head.train()`: a deliberate partial mode (linear probe)
        return False


def _last_pass_undone(leak: Event, name: str, loop: Loop, model: FileModel) -> bool:
    """Whether ``leak`` runs only on the last iteration of its loop (``if i == len(loader) - 1:``, an
    end-of-epoch evaluation), and the loop around it puts ``name`` back in train mode before it runs
    this loop again: no training step runs in eval mode."""
    parent = loop.parent
    if not loop.is_loop or parent is None or not parent.is_loop:
        return False
    reader = GuardReader(loop, model.index.int_inits)
    if not any(reader.guard((cond,), leak.order).kind is GuardKind.LAST for cond in leak.conds):
        return False  # (one test of the last iteration is enough: `and (e + 1) % k == 0` narrows it further)
    return any(e.kind is Kind.TRAIN_MODE and e.order < loop.order and not e.conds
               and _resolve(e.receiver, parent, e.order) == name for e in parent.events())


def _updates_of(name: str, owners: dict[str, set[str]], events: list[Event], loop: Loop, order: int) -> list[int]:
    """Where ``name`` is trained: the steps of the optimizers built over its parameters (a GAN's
    generator update does not train the discriminator put in eval mode for it); empty when unknown."""
    # the optimizers' modules as the loop's own scope names them first: inside an inference helper
    # whose parameter `model` is bound to `nao`, the main `optimizer` over `model` is not nao's
    mine = _optimizers_of(name, owners, loop, loop.order) or _optimizers_of(name, owners, loop, order)
    found = []
    for e in events:
        if e.kind is Kind.STEP and e.optimizer:
            # the optimizer this step's scope builds (two functions may each call theirs `optimizer`)
            built, at = _built_over(e, loop)
            if any(_resolve(m, e.loop or loop, at) == name for m in built) if built \
                    else last_part(_stepped(e, loop)) in mine:
                found.append(e.order)
    return found


def _optimizers_of(name: str, owners: dict[str, set[str]], loop: Loop, order: int) -> set[str]:
    """The optimizers the file builds over ``name``'s parameters (their short names)."""
    return {opt for opt, modules in owners.items() if any(_resolve(m, loop, order) == name for m in modules)}


def _built_over(step: Event, loop: Loop) -> tuple[set[str], int]:
    """The modules whose parameters the optimizer ``step`` steps is built over, where the step's own
    scope builds it (``optimizer = Adam(model.parameters())`` in the function that steps it), and the
    order of that binding: the names are read as they stand there (the helper's parameter ``model``
    bound at a later call of it is another module)."""
    bound = [a for scope in _scopes(step, loop) for a in scope.assignments
             if a.names == (step.optimizer,) and a.op == "=" and a.order < step.order and a.visible_at(step.order)]
    binding = max(bound, key=lambda a: a.order) if bound else None
    if binding is None or type(binding.value) is not cst.Call:
        return set(), step.order
    return {module_name(m) for m in parameter_owners(binding.value)}, binding.order


def _trains_others_only(name: str, owners: dict[str, set[str]], events: list[Event], loop: Loop, order: int,
                        steps: list[int], model: FileModel) -> bool:
    """``name`` has an optimizer of its own that the file steps, and every optimizer the loop steps is
    built over the parameters of modules other than ``name`` (DivideMix's ``train(epoch, net1, net2,
    optimizer1, ...)``, which puts the peer ``net2`` in eval mode and steps ``optimizer1 =
    SGD(net1.parameters())``, and ``optimizer2`` in the call that trains ``net2``): this loop does not
    train ``name``; a loop around it that does decides."""
    stepped = [e for e in events if e.kind is Kind.STEP and e.order in steps]
    if not stepped or any(not e.optimizer for e in stepped):
        return False
    own = _optimizers_of(name, owners, loop, order)
    if not own or not any(e.optimizer and last_part(_stepped(e, scope)) in own
                          for scope in model.loops() for e in scope.events(Kind.STEP)):
        return False  # (an optimizer of the file known to train ``name``, and stepped somewhere)
    for step in stepped:
        # the modules as the optimizer's own scope names them: the step's function where it builds
        # the optimizer, else the loop's (a helper's parameter names its argument only within its call)
        modules, at = _built_over(step, loop)
        if not modules:
            modules, at = owners.get(last_part(_stepped(step, loop))) or set(), loop.order
        for module in modules or [None]:
            resolved = _resolve(module, step.loop or loop, at) if module is not None else None
            if resolved is None or resolved == name or resolved.startswith(name + ".") \
                    or name.startswith(resolved + "."):
                return False  # unknown, or the module itself, a part of it or what holds it
    return True


def _left_to(loop: Loop, owners: dict[str, set[str]], model: FileModel) -> list[Event]:
    """The ``eval()`` calls of loops nested in ``loop`` that their own loop leaves to the loops around
    it, because it trains only other modules (BiC's stage 1 puts the bias layers in eval mode while
    it steps the backbone's optimizer: the task loop, which also runs stage 2, decides)."""
    found: list[Event] = []
    for inner in loop.nest():
        if inner is loop or not inner.events(Kind.EVAL_MODE):
            continue
        events = inner.events(deep=True)
        steps = [e.order for e in events if e.kind is Kind.STEP]
        found += [e for e in inner.events(Kind.EVAL_MODE) if steps and (name := _resolve(e.receiver, inner, e.order))
                  and _trains_others_only(name, owners, events, inner, e.order, steps, model)]
    return found


def _input_gradients(loop: Loop) -> bool:
    """The loop makes a tensor it binds itself require grad (``gen_x = batch.x; gen_x.requires_grad =
    True``, ``x.requires_grad_()``): its backward passes are for that tensor's gradient (Langevin
    dynamics on the inputs of a frozen energy model, an adversarial attack), not a module's."""
    bound = {n for a in loop.assignments for n in a.names if a.op != "for"}
    for node in walk(loop.node):
        kind = type(node)
        if kind is cst.Assign and type(node.value) is cst.Name and node.value.value == "True":  # type: ignore[attr-defined]
            if any(type(t.target) is cst.Attribute and t.target.attr.value == "requires_grad"  # type: ignore[attr-defined]
                   and dotted(t.target.value) in bound for t in node.targets):  # type: ignore[attr-defined]
                return True
        elif kind is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "requires_grad_" \
                and dotted(node.func.value) in bound and not (node.args and source(node.args[0].value) != "True"):  # type: ignore[attr-defined]
            return True
    return False


def _stepped_in_train_mode(name: str, events: list[Event], loop: Loop, steps: list[int]) -> list[int]:
    """Where ``name`` is trained, where the optimizers' parameters are not known: the steps of the
    optimizers that step while the loop has put ``name`` in train mode. A second optimizer stepped
    only after ``name.eval()`` (fusion weights fitted over two frozen branches, then `train()` again at
    the next epoch's top) trains something else; without a ``train()`` in the loop nothing is known."""
    mode: bool | None = None
    mine: set[str] = set()
    for event in events:
        if event.kind in (Kind.TRAIN_MODE, Kind.EVAL_MODE) and _resolve(event.receiver, loop, event.order) == name:
            mode = event.kind is Kind.TRAIN_MODE
        elif event.kind is Kind.STEP and mode and event.order in steps and event.optimizer:
            mine.add(last_part(_stepped(event, loop)))
    return [e.order for e in events if e.kind is Kind.STEP and e.order in steps and e.optimizer
            and last_part(_stepped(e, loop)) in mine]


def _stepped(step: Event, loop: Loop) -> str:
    """The caller's name for the optimizer ``step`` steps: a helper's parameter is the argument bound
    to it at the call (``train_component(self.agent.world_model, self.optimizer_world_model)``
    steps ``self.optimizer_world_model`` as ``optimizer``), so that one helper shared by several
    modules' updates does not make each of them an update of every module."""
    name = step.optimizer or ""
    for _ in range(4):
        bound = [a for scope in _scopes(step, loop) for a in scope.assignments
                 if a.names == (name,) and a.op == "=" and a.order < step.order and a.visible_at(step.order)]
        value = dotted(max(bound, key=lambda a: a.order).value) if bound else None
        if value is None or value == name:
            break
        name = value
    return name


def _built_in_helper(leak: Event, loop: Loop) -> bool:
    """Whether ``leak`` (inlined from a helper) switches a local the helper binds to a module it
    builds itself (``net = Net(cfg); net.load_state_dict(...); net.eval()``): a new object that only
    shares its name with the model the loop trains."""
    origin = leak.origin
    if leak.site is None or origin is None or origin is loop.function or not leak.receiver \
            or "." in leak.receiver or leak.receiver in {p.name.value for p in origin.params.params}:
        return False
    bindings = [a for scope in _scopes(leak, loop) for a in scope.assignments
                if a.names == (leak.receiver,) and a.order < leak.order]
    if not bindings:
        return False
    last = max(bindings, key=lambda a: a.order)
    return isinstance(last.value, cst.Call) and _wrapped(last.value) is None and not _copies(last.value) \
        and _inside(last.node, origin.body)


def _takes_own_module(leak: Event, loop: Loop) -> bool:
    """Whether ``leak`` (inlined from a method) switches a local the method binds to an attribute of
    its object (``model = self.model; model.eval()``), the module the loop trains under its own alias
    (``model = self.model`` in ``train()``). A module handed to a helper as an argument is not read
    this way: such a helper may be part of the training itself (a zeroth-order forward run in eval
    mode on purpose)."""
    origin = leak.origin
    if leak.site is None or origin is None or origin is loop.function or not leak.receiver \
            or "." in leak.receiver:
        return False
    mine = [a for scope in _scopes(leak, loop) for a in scope.assignments
            if a.names == (leak.receiver,) and a.order < leak.order and _inside(a.node, origin.body)]
    # `model = self.model`, maybe wrapped again there (`model = torch.nn.DataParallel(model)`)
    return any((dotted(a.value) or "").startswith("self.") for a in mine) and all(
        a.op == "=" and ((dotted(a.value) or "").startswith("self.") or _wrapped(a.value) == leak.receiver)
        for a in mine)


def _attribute_aliases(locals_: set[str], loop: Loop) -> set[str]:
    """Those of ``locals_`` that the function running ``loop`` binds once, to an attribute (``model =
    context.model``, ``model = self.model``), and in no other way (no parameter, no second binding):
    each is that module under another name. One walk of the function for all of them."""
    scope = loop.function
    wanted = {name for name in locals_ if "." not in name}
    if scope is None or not wanted:
        return set()
    params = [*scope.params.params, *scope.params.kwonly_params, *scope.params.posonly_params]
    wanted -= {p.name.value for p in params}
    bindings: dict[str, list[cst.CSTNode]] = {}
    for node in walk(scope.body, into_functions=True):
        for name in _bound_names(node) & wanted:
            bindings.setdefault(name, []).append(node)
    return {name for name, nodes in bindings.items() if len(nodes) == 1 and isinstance(nodes[0], cst.Assign)
            and len(nodes[0].targets) == 1 and isinstance(nodes[0].value, cst.Attribute)
            and dotted(nodes[0].value) is not None}


def _names_the_attribute(leak: Event, loop: Loop, attribute: str) -> bool:
    """Whether ``leak`` is in the loop's own code (``model.eval()`` on the local), or in a helper whose
    parameter the call binds to ``attribute`` itself (``predict(context.model, loader)``). A helper
    handed the local (``zo_forward(model, inputs)``) is followed only to the caller's name, as for any
    module handed to a helper: such a helper may be part of the training (a zeroth-order forward run
    in eval mode on purpose)."""
    if leak.site is None:
        return True
    bound = [a for scope in _scopes(leak, loop) for a in scope.assignments
             if a.names == (leak.receiver,) and a.op == "=" and a.order < leak.order]
    if not bound:
        return False
    last = max(bound, key=lambda a: a.order)
    return isinstance(last.node, cst.Call) and _wrapped(last.value) == attribute  # a parameter bound at a call


def _bound_names(node: cst.CSTNode) -> set[str]:
    """The names ``node`` binds: an assignment, loop, ``with``, walrus or augmented target, an import,
    or a nested function or class."""
    kind = type(node)  # exact types: libcst's classes are ABCs, and isinstance() on them is slow
    if kind is cst.Assign:
        return {n for t in node.targets for n in names_in(t.target)}  # type: ignore[attr-defined]
    if kind in _TARGETED:
        return set(names_in(node.target))  # type: ignore[attr-defined]
    if kind is cst.AsName:
        return set(names_in(node.name))  # type: ignore[attr-defined]
    if kind is cst.FunctionDef or kind is cst.ClassDef:
        return {node.name.value}  # type: ignore[attr-defined]
    return set()


_TARGETED = (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)


def _inside(node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    """Whether ``node`` is ``outer`` or one of its descendants."""
    return any(n is node for n in walk(outer, into_functions=True))


def _trains_in_eval_mode(leak: Event, name: str, owners: dict[str, set[str]], steps: list[int], loop: Loop,
                         events: list[Event]) -> bool:
    """Whether ``leak`` is written at the top of the iteration that trains ``name``, so that every
    training step of the loop runs in eval mode by design (a re-ID backbone whose pretrained BatchNorm
    statistics are kept: ``model.eval()`` then the forward, backward and step): unconditional, in the
    loop's own code, with no evaluation (a ``no_grad`` block, an inner loop) before the first update
    after it, and that update is ``name``'s own (not a GAN generator's step that the discriminator's
    ``eval()`` was meant for)."""
    if leak.conds or leak.site is not None or leak.loop is not loop or not (
            isinstance(leak.node, cst.Call) and isinstance(leak.node.func, cst.Attribute)
            and leak.node.func.attr.value in ("eval", "train")):
        return False  # a helper that switches modes (an attack on the model, an evaluation) is no choice of mode
    # A DeepSpeed engine's step (`engine.step()` in an `if distributed_type == DEEPSPEED:` branch) steps
    # the optimizer the engine wraps, the model's own: where the loop also steps an optimizer by name,
    # that step stands for both, so the branch reads as the plain loop does.
    engine = {e.order for e in events if e.kind is Kind.STEP and e.framework is Framework.ENGINE}
    if not engine or all(s in engine for s in steps):
        engine = set()
    steps = [s for s in steps if s not in engine]
    later = _later(leak, steps, events, loop)
    if not later:
        return False
    first = min(later)  # the first step of any optimizer
    step = next((e for e in events if e.order == first), None)
    if step is None or not within(step.loop, loop):
        return False  # (a batch loop under the epoch loop whose top switches the mode: a frozen encoder's probe)
    mine = _updates_of(name, owners, events, loop, leak.order)
    stepped = {e.optimizer or e.receiver for e in events if e.kind is Kind.STEP and e.order not in engine}
    if first not in mine if mine else len(stepped) != 1:
        return False  # another module's update first, or several optimizers none of which is known to be name's
    body = lines(loop.node.body)
    at = next((i for i, stmt in enumerate(body) if stmt is leak.stmt), None)
    if at is None:
        return False
    for stmt in body[at + 1:]:
        if _inside(step.stmt, stmt):
            return True
        if _evaluates(stmt):
            return False
    return False


def _evaluates(stmt: cst.CSTNode) -> bool:
    """Whether ``stmt`` holds what an evaluation looks like: a loop (over validation data) or a
    ``no_grad`` / ``inference_mode`` block. A loop over the model's own parameters (a gradient norm
    summed by hand after the backward) reads gradients, not data."""
    for node in walk(stmt, into_functions=True):
        if isinstance(node, cst.For) and _over_parameters(node):
            continue
        if isinstance(node, (cst.For, cst.While)):
            return True
        if isinstance(node, cst.WithItem):
            item = node.item
            name = func_name(item) if isinstance(item, cst.Call) else dotted(item)
            if last_part(name or "") in ("no_grad", "inference_mode"):
                return True
    return False


def _over_parameters(loop: cst.For) -> bool:
    """``for n, p in model.named_parameters():`` (also ``parameters()``)."""
    return isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Attribute) \
        and loop.iter.func.attr.value in ("parameters", "named_parameters")


def _later(leak: Event, updates: list[int], events: list[Event], loop: Loop) -> list[int]:
    """The updates that can still run after ``leak`` in its iteration and back-propagate a forward
    that runs after it: not those an exit of the leak's branch skips (``if done: validate(); break``
    before the step) or an else branch holds, nor a step whose loss was computed before the
    ``eval()`` (``loss = f(model(x)); evaluate(model); loss.backward(); opt.step()``: its gradients
    come from the train-mode forward)."""
    conds = {e.order: e.conds for e in events}
    return [u for u in updates if u > leak.order and not exclusive(conds.get(u, ()), leak.conds)
            and not _fed_before(leak, u, events, loop)]


def _fed_before(leak: Event, update: int, events: list[Event], loop: Loop) -> bool:
    """Whether every backward the iteration may run between ``leak`` and ``update`` back-propagates a
    loss name last bound before ``leak``; with none, the step uses the gradients of backward passes
    that ran before the ``eval()`` (``loss.backward(); evaluate(model); opt.step()``)."""
    backwards = [e for e in events if e.kind is Kind.BACKWARD and leak.order < e.order < update
                 and not exclusive(e.conds, leak.conds)]
    return all(_bound_before(b, leak.order, loop) for b in backwards)


def _bound_before(backward: Event, order: int, loop: Loop) -> bool:
    """Whether the loss ``backward`` back-propagates is a name whose every binding that may reach it
    comes before ``order`` (a forward written into the backward's own expression does not)."""
    name = dotted(backward.loss) if backward.loss is not None else None
    if name is None:
        return False
    bindings = [a for scope in _scopes(backward, loop) for a in scope.assignments
                if name in a.names and a.order < backward.order]
    return bool(bindings) and all(a.order < order for a in bindings)


def _one_or_the_other(leak: Event, updates: list[int], events: list[Event], loop: Loop) -> bool:
    """Whether a flag the loop never rebinds (an epoch helper's ``train`` parameter) holds one way where
    ``leak`` runs and the other way at every update: each run of the loop either evaluates
    (``_run_one_epoch(epoch, train=False)``) or trains, never both, so the leak cannot reach this
    loop's own steps; the caller's loop, which runs both, is read on its own."""
    if not loop.is_loop or not updates:
        return False
    rebound = loop.assigned_names()
    flags = {(test.value, negated) for test, negated in _literals(leak.conds)
             if isinstance(test, cst.Name) and test.value not in rebound}
    if not flags:
        return False
    conds = {e.order: e.conds for e in events}
    for update in updates:
        theirs = {(test.value, negated) for test, negated in _literals(conds.get(update, ()))
                  if isinstance(test, cst.Name)}
        if not any((name, not negated) in theirs for name, negated in flags):
            return False
    return True


def _literals(conds: tuple[Cond, ...]) -> list[tuple[cst.BaseExpression, bool]]:
    """The tests ``conds`` imply, each with whether it is negated: ``if not train and x:`` implies
    ``train`` negated and ``x``; the else branch of ``if a or b:`` implies both negated."""
    out: list[tuple[cst.BaseExpression, bool]] = []
    pending = [(c.test, c.negated) for c in conds if c.test is not None]
    while pending:
        test, negated = pending.pop()
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            pending.append((test.expression, not negated))
        elif isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or if negated else cst.And):
            pending.extend([(test.left, negated), (test.right, negated)])
        else:
            out.append((test, negated))
    return out


def _evaluated_again(leak: Event, name: str, evals: list[Event], updates: list[int], loop: Loop,
                     events: list[Event]) -> bool:
    """Whether another ``eval()`` of the same module runs after ``leak`` and before the next update: later
    in the iteration, or, where no update follows ``leak`` in it, unconditionally before the first
    update of the next (an epoch that starts with ``encoder.eval()``: that one decides)."""
    later = _later(leak, updates, events, loop)
    if not later and updates:
        # (also one in a loop nested in this one, which judges it: a helper called at the top of an inner loop)
        return any(e is not leak and e.kind is Kind.EVAL_MODE and e.order < min(updates) and not e.conds
                   and _resolve(e.receiver, e.loop or loop, e.order) == name for e in [*evals, *events])
    return any(e is not leak and leak.order < e.order < min(later, default=e.order + 1)
               and _resolve(e.receiver, loop, e.order) == name for e in evals)


def _skipped_in_eval(leak: Event, name: str, events: list[Event], loop: Loop) -> set[int]:
    """The orders of the backwards and steps after ``leak`` that run only ``if m.training:`` where
    ``m`` is in eval mode there (the last mode switch of ``m`` before them in the iteration is an
    ``eval()``: ``leak`` itself or another one): a train/validation helper called for validation (``model.eval()``, ``swa_model.eval()``,
    then ``step(val_loader, model, ...)``, ``step(val_loader, swa_model, ...)``) updates nothing."""
    later = [e for e in events if e.order > leak.order]
    modes = [(e.order, e.kind is Kind.EVAL_MODE, _resolve(e.receiver, loop, e.order)) for e in events
             if e.kind in (Kind.EVAL_MODE, Kind.TRAIN_MODE)]

    def in_eval(module: str | None, order: int) -> bool:
        last = max(((o, off) for o, off, m in modes if o < order and m == module), default=None)
        return module is not None and last is not None and last[1]

    return {e.order for e in later if e.kind in (Kind.BACKWARD, Kind.STEP) and any(
        not c.negated and any(in_eval(_resolve(m, loop, e.order), e.order) for m in _training_of(c.test, e, loop))
        for c in e.conds)}


def _training_of(test: cst.BaseExpression | None, event: Event, loop: Loop) -> list[str]:
    """The modules whose train mode ``test`` requires: ``m.training``, or a mode named after them
    (``mode = "train" if self.encoder.training and self.gru.training else "val"``, then ``if mode ==
    "train":``, a train/validation epoch function of the atari-representation-learning methods)."""
    if type(test) is cst.Attribute and test.attr.value == "training":
        return [m for m in [dotted(test.value)] if m is not None]
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 \
            or type(test.comparisons[0].operator) is not cst.Equal:
        return []
    binding = _binding(test.left, event, loop)
    said = _constant(test.comparisons[0].comparator)
    if binding is None or type(binding.value) is not cst.IfExp or _constant(binding.value.body) != said \
            or said is _UNKNOWN or _rebound(binding, event, loop):
        return []
    return [m for part in conjuncts(binding.value.test) if type(part) is cst.Attribute and part.attr.value == "training"
            and (m := dotted(part.value)) is not None]


def _dead(event: Event, loop: Loop, at_call: bool = False) -> bool:
    """Whether a condition of ``event`` reads a helper parameter bound to a literal at the call
    (``_run_epoch("val")``, ``run_epoch(model, loader, None)``) so that it never holds there:
    ``if mode == "train" or mode == "train+log":`` called with ``"eval"``, ``if optimizer:`` with ``None``.
    ``at_call``: comparisons count only where the literal is a parameter's at the call and nothing
    but other calls binds that name (not ``batch = 0`` before a loop that runs ``batch += 1``). Also
    where a flag the loop's function sets before its loops rules it out (``self.is_test = False``)."""
    if loop.assumptions and ruled_out(event.conds, loop.assumptions):
        return True
    for cond in event.conds:
        holds = _truth(cond.test, event, loop, at_call)
        if holds is not None and holds == cond.negated:
            return True
    return False


_UNKNOWN = object()


def _truth(test: cst.BaseExpression, event: Event, loop: Loop, at_call: bool = False) -> bool | None:
    """The value of ``test`` where the literals bound to the names it reads decide it, else None."""
    if isinstance(test, cst.BooleanOperation):
        left, right = _truth(test.left, event, loop, at_call), _truth(test.right, event, loop, at_call)
        if isinstance(test.operator, cst.Or):
            return True if True in (left, right) else (False if left is False and right is False else None)
        return False if False in (left, right) else (True if left is True and right is True else None)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _truth(test.expression, event, loop, at_call)
        return None if inner is None else not inner
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
            return None
        target = test.comparisons[0]
        literal = _constant(target.comparator)
        value = _bound(test.left, event, loop)
        if at_call and value is not _UNKNOWN:
            binding = _binding(test.left, event, loop)
            if not isinstance(binding.node, cst.Call) or any(  # type: ignore[union-attr]
                    a is not binding and binding.names[0] in a.names and not isinstance(a.node, cst.Call)
                    for scope in _scopes(event, loop) for a in scope.assignments):  # type: ignore[union-attr]
                return None
        if literal is _UNKNOWN or value is _UNKNOWN:
            return None
        return (value == literal) == isinstance(target.operator, cst.Equal)
    # `if optimizer:` called with None; a flag assigned True/False in a loop may be rebound by a
    # later iteration (`first = False` after the test), so there only None decides; a helper's flag
    # bound at its call (`_run_one_epoch(epoch, cross_valid=True)`) that nothing rebinds decides too
    binding = _binding(test, event, loop)
    value = _UNKNOWN if binding is None else _constant(binding.value)
    if value is None:
        return False
    if isinstance(value, bool) and isinstance(binding.node, cst.Call) and not _rebound(binding, event, loop):
        return value
    return None


def _scopes(event: Event, loop: Loop) -> Iterator[Loop]:
    scope: Loop | None = event.loop or loop
    while scope is not None:  # the binding sits in the loop that calls the helper
        yield scope
        scope = scope.parent


def _binding(expr: cst.BaseExpression, event: Event, loop: Loop) -> Assignment | None:
    """The last plain assignment of the name ``expr`` before ``event`` (a helper's parameter at the call)."""
    name = dotted(expr)
    if name is None:
        return None
    bound = [a for scope in _scopes(event, loop) for a in scope.assignments
             if a.names == (name,) and a.op == "=" and a.order < event.order]
    return max(bound, key=lambda a: a.order) if bound else None


def _rebound(binding: Assignment, event: Event, loop: Loop) -> bool:
    """Whether anything else assigns the bound name after the binding, before or after ``event``."""
    return any(a is not binding and binding.names[0] in a.names and a.order > binding.order
               for scope in _scopes(event, loop) for a in scope.assignments)


def _bound(expr: cst.BaseExpression, event: Event, loop: Loop) -> object:
    """The literal last bound to the name ``expr`` before ``event`` (a helper's parameter at the call)."""
    binding = _binding(expr, event, loop)
    return _UNKNOWN if binding is None else _constant(binding.value)


def _constant(expr: cst.BaseExpression) -> object:
    """The value of a string or number literal or of ``None``/``True``/``False``, else _UNKNOWN."""
    if isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[expr.value]
    return _UNKNOWN


def _helper_local(name: str, leak: Event, loop: Loop) -> bool:
    """Whether ``name`` is a name of the helper the leak was inlined from (its parameter or a name it
    binds, such as ``m`` of ``for m in models: m.eval()``) that the caller's name was not found for:
    the loop's own code cannot call ``name.train()``."""
    origin = leak.origin
    if origin is None or origin is loop.function:
        return False
    root = name.split(".")[0]
    mine = loop.function.params.params if loop.function is not None else ()
    if root in ("self", "cls") and any(p.name.value == root for p in mine):
        return False  # a method of the same object
    if root in {p.name.value for p in [*origin.params.params, *origin.params.kwonly_params]}:
        return True
    return any(isinstance(node, (cst.For, cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and isinstance(
        getattr(node, "target", None), (cst.Name, cst.Tuple, cst.List)) and root in names_in(node.target)
        for node in walk(origin))


def _train_first(loop: Loop, name: str) -> Fix | None:
    """Put ``name.train()`` first in the training loop's body: every iteration starts in train mode.
    Unsafe: it also switches back submodules the code keeps in eval mode on purpose (a frozen
    BatchNorm backbone), which only the author can tell apart."""
    body = loop.node.body if isinstance(loop.node, (cst.For, cst.While)) else None
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    fix = insert_before(body.body[0], f"{name}.train()", f"call `{name}.train()` at the start of each iteration")
    return replace(fix, safe=False)


def _kept_in_eval(leak: Event, name: str, events: list[Event], loop: Loop) -> bool:
    """Whether the function puts ``name`` in eval mode itself, unconditionally, before the loop, and
    nothing in the loop puts it back in train mode (``gen_net.eval()`` before a loop that trains only
    an architecture controller and scores the generator in each iteration): every iteration already
    runs with the module in eval mode, so an ``eval()`` of it inside the loop changes nothing."""
    scope = loop.parent
    if not loop.is_loop or scope is None:
        return False

    def related(event: Event, order: int) -> bool:
        resolved = _resolve(event.receiver, loop, order)
        return resolved is None or resolved == name or resolved.startswith(name + ".") \
            or name.startswith(resolved + ".")

    before = [e for e in scope.events(Kind.EVAL_MODE, Kind.TRAIN_MODE) if e.order < loop.order]
    last = max((e for e in before if related(e, e.order)), key=lambda e: e.order, default=None)
    # in the loop's own function, unconditional there: its scope's code, or inlined with the loop from
    # the helper that holds both (at the caller's loop, under the same conditions as the loop)
    return last is not None and last.kind is Kind.EVAL_MODE \
        and (not last.conds and last.site is None and not scope.is_loop
             or last.site is not None and last.origin is not None and _inside(loop.node, last.origin.body)
             and [id(c) for c in last.conds] == [id(c) for c in loop.conds]) \
        and _resolve(last.receiver, loop, last.order) == name \
        and not any(e.kind is Kind.TRAIN_MODE and related(e, e.order) for e in events)


def _alternating(leak: Event, name: str, events: list[Event], loop: Loop) -> bool:
    """A ``train()`` of the same model on a branch exclusive with the ``eval()``: modes by phase."""
    return any(e.kind is Kind.TRAIN_MODE and e.loop is leak.loop and exclusive(e.conds, leak.conds)
               and _resolve(e.receiver, loop, e.order) == name for e in events)


def _teacher_only(name: str | None, owners: dict[str, set[str]], loop: Loop) -> bool:
    """The file's optimizers are built over other modules than ``name``, and the loop calls it only
    under ``no_grad`` (``with torch.no_grad(): soft_preds = schp_model(images)``): it gives targets, it
    is not trained."""
    if name is None or any(name in modules for modules in owners.values()):
        return False
    if not any(owners.values()):
        # where the file shows no optimizer's modules, only the loop's own code can tell: ENAS's
        # controller loop runs the shared network under `no_grad` for its reward, nothing else
        return _only_without_grad(loop.node, name)
    calls = [a for scope in loop.nest() for a in scope.assignments
             if type(a.value) is cst.Call and dotted(a.value.func) == name]  # type: ignore[attr-defined]
    return bool(calls) and all(a.contexts and any(c.kind == "no_grad" for c in a.contexts) for a in calls)


def _only_without_grad(node: cst.CSTNode, name: str) -> bool:
    """Whether ``node`` names ``name`` only to switch its mode (``name.eval()``) or to call it under
    ``with torch.no_grad():``, with one such call at least; not where anything else reads it (a call
    with gradients, an argument). Walked with a stack: a loop body may nest deeply."""
    found = False
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    while stack:
        node, quiet = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.Lambda:
            continue
        if kind is cst.With and any(last_part((func_name(i.item) if type(i.item) is cst.Call else dotted(i.item)) or "")
                                    in ("no_grad", "inference_mode") for i in node.items):  # type: ignore[attr-defined]
            quiet = True
        if kind is cst.Call:
            called = dotted(node.func)  # type: ignore[attr-defined]
            if called in (f"{name}.eval", f"{name}.train"):
                continue
            if called == name:
                if not quiet:
                    return False
                found = True
                stack.extend((a, quiet) for a in node.args)  # type: ignore[attr-defined]
                continue
        if (kind is cst.Name or kind is cst.Attribute) and dotted(node) == name:
            return False
        stack.extend((child, quiet) for child in children(node))
    return found


def _resolve(receiver: str | None, loop: Loop, order: int) -> str | None:
    """The caller's name for a helper's parameter (``net`` bound to ``model`` at the call), and the
    module behind a wrapper (``ddp_disc = DDP(disc)``: ``disc``)."""
    name = module_name(receiver) if receiver else None
    for _ in range(4):
        if name is None:
            return None
        found = None
        scope: Loop | None = loop
        while scope is not None and found is None:
            bindings = [a for a in scope.assignments if a.names == (name,) and a.op == "=" and a.order < order
                        and a.visible_at(order)]
            if bindings and _copies(max(bindings, key=lambda a: a.order).value):
                return None  # `net = copy.deepcopy(net)`: a copy's mode is not the model's
            bindings = [a for a in bindings if (wrapped := _wrapped(a.value)) is not None and wrapped != name]
            found = max(bindings, key=lambda a: a.order) if bindings else None
            scope = scope.parent
        if found is None:
            break
        # what the argument names is read before the binding: `train(net2, net1)` binds `net = net2`
        # and `net2 = net1` at once, and `net` is the caller's `net2`, not `net1`
        name, order = _wrapped(found.value), found.order
    return module_name(name) if name is not None else None


_DOTTED = Pattern(r"[A-Za-z_][\w.]*")
_WRAPPERS = {"DDP", "DistributedDataParallel", "DataParallel", "FSDP", "FullyShardedDataParallel", "compile"}


def _built_anew(value: cst.BaseExpression, name: str) -> bool:
    """Whether ``value`` builds a module of its own rather than wrapping, moving or copying ``name``
    (``GPT4TS(args, device)``, not ``DDP(model)``, ``model.to(device)`` or ``copy.deepcopy(model)``)."""
    return type(value) is cst.Call and not _copies(value) \
        and not any(n == name or n.startswith(name + ".") for n in names_in(value))


def _copies(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and last_part(func_name(value) or "") in ("deepcopy", "copy")


def _wrapped(value: cst.BaseExpression) -> str | None:
    """``model`` for ``model``, ``DDP(model, ...)``, ``torch.compile(model)``, ``model.to(device)``."""
    if isinstance(value, cst.Call) and last_part(func_name(value) or "") in _WRAPPERS:
        args = positional(value)
        value = args[0] if args else value
    name = dotted(value)
    if name is None and isinstance(value, cst.Call):
        name = module_name(source(value))  # `model.to(device)`
        return name if _DOTTED.fullmatch(name) else None
    return name


def _only_when(model: FileModel, options: tuple[str, ...] | None) -> str:
    """`` (only when `args.dropout` > 0; its default is 0.0)`` where the model's only mode-dependent
    layers are dropouts whose rate options leave at 0 as the file ships them."""
    if not options:
        return ""
    defaults = dict(option_defaults(model.index))
    said = [f"`{o}` > 0" for o in options]
    shown = {source(d) for o in options if (d := defaults.get(last_part(o))) is not None}
    default = f"; its default is {shown.pop()}" if len(shown) == 1 and len(options) == 1 else ""
    return f" (only when {' or '.join(said)}{default})"
