"""## What it does
Checks that a scheduler's horizon (`T_max`, `total_steps`, `num_training_steps`) is counted in
the same unit as its stepping, where both are visible in the file: epochs against per-batch
stepping, batches against per-epoch stepping, micro-batches against per-update stepping. A
`SequentialLR` runs to the horizon of the schedule it ends with (`[LinearLR(optimizer,
total_iters=warmup_steps), CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps)]`), also built
by a function of the file that returns it with its optimizer; a name bound only to another scheduler's
name (`scheduler = cosine`) holds that one's horizon. A learning rate the loop sets by hand
from a schedule function of the file (`lr = get_lr(global_step, max_lr, len(train_loader) * epochs)`,
then `optimizer.param_groups[0]['lr'] = lr`) is checked the same way: the argument the function divides
by its length (or compares with it) is its step count, which counts optimizer steps where the loop adds
1 to it only where it steps, batches where it is the loop's index (nanoVLM's warmup and cosine reached a
quarter of their length until `// gradient_accumulation_steps` was added).

The horizon's unit is read from what the file shows: `len(train_loader)` (also `len(train_examples) /
args.train_batch_size`, as BERT-era scripts count batches) and names such as
`steps_per_epoch` or `epoch_length` count batches (a division by `len(train_loader)`, as in
`epochs = args.iters // len(train_loader)`, counts none: the name then says what it is), a division by the accumulation count makes
optimizer steps, a multiplication by it makes micro-batches again (`max_train_steps *
gradient_accumulation_steps`), a name that says only `epochs` counts epochs (so does a setting looked up
by that key: `config["epochs"]`, `cfg.get("num_epochs", 100)`; a clamp or cast such as `max(1, args.epochs -
args.warmup_epochs)` counts what it is given; a name set in several branches counts what they all count,
where a branch that takes a setting as given, `total_train_steps = int(training_args.max_steps)` beside
`total_train_steps = steps_per_epoch * num_epochs` in the default branch, leaves the unit to the others),
and the bound of the
training loop counts that loop's iterations (`for it in range(max_iters)`, `while step < max_steps:`
whose body adds 1 to `step` on every iteration, or `if global_step >= max_steps: break` where the
loop adds 1 to `global_step` on every iteration, also `>` or `== max_steps + 1` for a count from 1:
micro-batches, not the updates a counter advanced only in the step branch counts; a bound a trainer
keeps, `self.total_steps` set only to `args.total_steps`, is that setting; so is what is left of it after a
warmup, `max(1, MAX_STEPS - warmup_steps)`), whatever its name says:
full-batch training that steps once per iteration of `for epoch in range(max_epoch):` counts its steps in `T_max=max_epoch` (also where the
loop's function takes `max_epoch` as a parameter and the caller builds `T_max=args.max_epoch`), and in
milestones that are shares of that bound (`milestones=[int(args.epochs * 0.5), int(args.epochs * 0.75)]`). A
horizon divided by the accumulation count (`t_total = len(loader) // gradient_accumulation_steps *
epochs`, copied from a script that accumulates) for a loop that steps the optimizer and the scheduler
on every batch counts N batches a step the loop never takes: the schedule ends N times early (not
where the loop back-propagates through `accelerator.backward`, whose DeepSpeed engine may accumulate
by its own config). Batches and optimizer steps are the same count where every configuration the
project ships sets the accumulation count to 1 (`grad_accumulation: 1` in each YAML, no option
setting it: the accumulation rules' reading). A scheduler stepped on every iteration of a loop nested in the loop whose iterations the horizon counts
(PPO's `for _ in range(ppo_epochs):`, or a rollout's mini-batches, inside `for batch in loader:` with
`num_training_steps = epochs * len(loader)`) steps as many times per counted iteration as the inner loop
runs: the schedule ends that many times early (not where the horizon also names the inner loop's bound,
`epochs * len(loader) * ppo_epochs`). The stepping's unit comes from the loop's shape: every
batch (also after a stop `if iters == total_iters: break`, which only ends the loop), every N-th micro-batch (a loop that runs backward, step and scheduler all under one condition, `if loss is
not None:`, steps on every batch it back-propagates), once per epoch (also from some epoch on, `if epoch >=
warmup_epochs:`, and after the batch loop of an Accelerate loop, outside `accumulate()`),
or, in a loop that enters `with accelerator.accumulate(model):`, once per optimizer step for a
scheduler handed to `accelerator.prepare` wherever the loop steps it (Accelerate 0.16 and later step
it only when the optimizer steps, unless `step_scheduler_with_optimizer=False`; earlier versions
stepped it on every call, so a project pinned to one, e.g. `accelerate==0.15.0`, is right to count
that horizon in micro-batches: loopcheck does not read the pin, suppress the finding there). A
scheduler built by a function of the same file or of another project module (`scheduler =
build_scheduler(optimizer, args)` with `return CosineAnnealingLR(optimizer, T_max=args.epochs)`,
also in one of several `if args.sched == ...:` branches), or by a method of the same class
(`self.scheduler = self._make_scheduler()`), is read as that function builds it, with the call's
arguments in place of its parameters. So is a scheduler the caller builds in another file and
hands over: a parameter of the top-level function that holds the loop (`train_one_epoch(model,
loader, optimizer, scheduler)` called from main.py), or one a trainer's `__init__` keeps
(`self.scheduler = scheduler`, `kwargs["scheduler"]`) for the loop of one of its methods, where
every call of that function or class in the project passes a scheduler built there by a
constructor (a caller passing anything else, a subclass, or the name handed on keeps it silent).
A scheduler bound in several branches (a fresh run's `optimizer, scheduler = set_optim(opt, model)`
beside a resumed run's `... = load(path, opt)`, which restores the scheduler the same code built and
is read as the same configuration), or built by a factory whose branches build different schedules
(`FixedScheduler(optimizer)` for `--scheduler fixed`, `WarmupLinearScheduler(...,
scheduler_steps=scheduler_steps)` with `scheduler_steps` set to `opt.total_steps` unless the user
gives `--scheduler_steps`), is read as one configuration per branch: a mismatch in one is reported,
naming the schedule it builds, where every other configuration builds a schedule with no horizon or
the same schedule over a horizon the user sets; another schedule with a horizon of its own keeps it
silent.
A `LambdaLR` whose schedule function is handed its lengths
(`partial(warmup_cosine, warmup=args.warmup_epochs, total=args.epochs)`, `lambda s:
warmup_cosine(s, args.warmup_epochs, args.epochs)`) counts in the unit all of them share; so does
one a factory defines inside and hands to `LambdaLR` (`def lr_lambda(step): ...` reading the factory's
`num_training_steps` and the locals it makes of it), which is handed those lengths as the factory's
caller passes them (a `last_epoch` left to its default is no length). Lengths that are the loop's
own bound and shares of it (`lambda step: cosine(step, warmup, num_steps)` with `warmup = int(0.1 *
num_steps)`, over `while step < num_steps:` counting batches) count the loop's iterations. A schedule
function of the file
or a lambda that divides its step count by lengths of its own (`math.cos(math.pi * epoch / args.epochs)`,
`epoch / args.warmup_epochs`) counts in the unit those lengths share. A step
under `isinstance` tests on the scheduler (`if isinstance(scheduler, OneCycleLR): scheduler.step()`,
its `else` branch, `if not isinstance(scheduler, OneCycleLR):`) steps only the schedules of the classes
the tests let through, and one under a case of an option (`if args.LRScheduler == 'cosine':`) only
those not built in the branch of another case of it (`if args.LRScheduler == 'multi_step': scheduler =
MultiStepLR(...)`); a factory's argument that the caller cannot read (`max_lr=[g["lr"] for g in
optimizer.param_groups]`) is no length and does not stop the others from being read. It is
silent where the file does not settle both: a horizon that names what the call does not pass (a
parameter's default, another module's constant), a scheduler built in another module by a class or
an object, a `scheduler.step(...)` with arguments, a step under a configuration flag, and an accumulation count
that is 1 as the file ships it (a batch is then an optimizer step; so is a parameter of the loop's function
whose default is 1 where no call of the file passes it, `def do_train(..., gradient_accumulation_steps=1)`).
Accelerate also counts processes (`loopcheck.model.process_count`, read from accelerate's source): a scheduler
handed to `accelerator.prepare` is stepped once per process on every optimizer step (unless the Accelerator
splits batches, `split_batches=True`, or is built with `step_scheduler_with_optimizer=False`), a scheduler left
out of it (`model, optimizer, _, _ = accelerator.prepare(model, optimizer, loader, lr_scheduler)` discards the
prepared one) once per call. `X * accelerator.num_processes` counts what `X` counts, per process. So a
prepared scheduler whose horizon is a setting counted in one process's optimizer steps (`total_iters=cfg.steps`
for a loop over `range(cfg.steps * cfg.gradient_accumulation_steps)`, or the bound of a loop on a count of real
optimizer steps), not multiplied by the process count, runs P times too fast on P processes; an unprepared one
whose horizon or warmup is multiplied by it (the diffusers scripts' form, right only for a prepared scheduler)
runs P times too slow. A prepared scheduler stepped once per epoch (after the batch loop, whose last batch
syncs) is stepped once per process as well: a horizon of epochs (`CosineAnnealingLR(optimizer,
T_max=args.epochs)`) is spent after 1/P of the epochs (leave an epoch scheduler out of `prepare`, or build
the Accelerator with `step_scheduler_with_optimizer=False`). A loader's length taken after `prepare` has
sharded the loader counts one process's batches: a prepared scheduler built on it afterwards
(`num_training_steps=num_epochs * len(train_dataloader)`, then `lr_scheduler = accelerator.prepare(lr_scheduler)`)
runs P times too fast, in any loop. Not flagged: a horizon worked out from a loader's length before `prepare`
(the global count, P times each process's), one the file does not bind, a file that
builds no Accelerator of its own, and a script whose every documented launch runs one process (as for LC501:
`python train.py` in its shell scripts and READMEs, `loopcheck.project.launches`); a multi-process launch, or
none documented, keeps the finding, which holds on P > 1 processes only.
The warmup length (`num_warmup_steps` of the `transformers` schedules) is read the same way: `warmup_steps *
gradient_accumulation_steps` for a scheduler stepped once per update stretches the ramp N times.
So are the step size of `StepLR`, the half cycle of `CyclicLR` (`step_size_up`) and the milestones
of `MultiStepLR` and `SequentialLR`: `step_size=args.lr_decay_epochs`,
`milestones=[int(args.epochs * 0.5), int(args.epochs * 0.75)]` or a warmup's end
`milestones=[args.warmup_epochs]` count epochs, `[e * len(train_loader) for e in
args.lr_decay_epochs]` counts batches; literal milestones (`[30, 60]`) say no unit.

## Why is this bad?
A cosine schedule with `T_max=epochs` stepped every batch completes a full cycle every few
hundred batches; one with `T_max=epochs * len(loader)` stepped once per epoch barely moves. Epoch
milestones stepped every batch cut the learning rate within the first epoch. Under
accumulation, a horizon of `len(loader) * epochs` stepped once per optimizer update reaches only
1/N of its schedule; so does a prepared Accelerate scheduler given `max_train_steps *
gradient_accumulation_steps`, or `len(train_dataloader) * epochs`, under `accumulate()`. The job runs
to the end with the wrong learning rate.

A horizon that is the bound of the training loop itself (`T_max=max_iters` with
`for it in range(max_iters)`, also through a progress bar, `tqdm(range(max_iters))`) counts that
loop's iterations: micro-batches under accumulation; so does the bound times the epoch loop's
(`T_max=epochs * iter_per_epoch` over `for epoch in range(epochs): for _ in range(iter_per_epoch):`),
and where each of those iterations is one optimizer step over an inner loop of micro-batches (a
meta-batch of tasks), it counts optimizer steps, whatever the names say. A loop over
`num_batches * grad_accumulation_factor` micro-batches (`tot = ...; for i in range(tot):`) that steps
every `grad_accumulation_factor` makes `num_batches` optimizer steps: a horizon `num_batches`, and a
warmup that is a share of it (`num_batches * warmup_ratio`), count optimizer steps.
A step under a configuration flag (`if step_scheduler_batch: scheduler.step()`, `if False:`) is
left alone: the flag usually selects the scheduler kind whose horizon fits that stepping, which
the file does not spell out.

## Fix
Count the horizon in the unit the scheduler is stepped in (for per-update stepping:
`epochs * math.ceil(len(loader) / accum_steps)`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.model import Cond, Event, FileModel, Framework, Kind, Loop, Role, Style, TrainingLoop
from loopcheck.model.accelerate import accumulation_setting, scheduler_gated, updates_bound
from loopcheck.model.from_ast import statement_text
from loopcheck.model.guards import GuardKind, unwrap_iterable
from loopcheck.model.index import Index
from loopcheck.model.lr_functions import set_rates
from loopcheck.model.horizon import (ACCUMULATION_NAME, Unit, decay_expr, horizon_expr, times_accumulation, unit_of,
                                     warmup_expr)
from loopcheck.model.narrowing import kind_tests, lets_through
from loopcheck.model.process_count import (left_unprepared, per_process_count, process_scaled, sharded_length,
                                          steps_per_process)
from loopcheck.model.syntax import (conjuncts, dotted, func_name, int_value, last_part, lines, names_in, own_call_name,
                                    param_names, positional, same, same_setting, small_statements, source, target_names,
                                    walk)
from loopcheck.latent import inert_count
from loopcheck.model.training import is_data_iterable, is_data_loop
from loopcheck.model.values import accumulation_gates_nothing, expanded_names, numeric
from loopcheck.project import arguments
from loopcheck.project.facts import FunctionFacts
from loopcheck.project.schedules import RESUME, SCHEDULE_TEXT, as_called, own_factory
from loopcheck.rules._base import Rule, Violation


class SchedulerHorizonMismatch(Rule):
    code = "LC303"
    message = "the scheduler's horizon is counted in other units than its stepping"

    VALID = [
        """
warmup = int(0.1 * num_steps)
scheduler = LambdaLR(optimizer, lr_lambda=lambda s: cosine_schedule(s, warmup, num_steps))
for step in range(num_steps):
    loss = model(next(batches)).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
""",
        """
per_node_train_batch_size = args.per_gpu_train_batch_size * args.n_gpu * args.gradient_accumulation_steps
train_batch_size = per_node_train_batch_size * torch.distributed.get_world_size()
num_training_steps = int(args.num_training_epochs * len(training_features) / train_batch_size)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=args.num_warmup_steps,
                                            num_training_steps=num_training_steps)
for epoch in range(args.num_training_epochs):
    for step, batch in enumerate(train_dataloader):
        loss = model(**batch).loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0 or step + 1 == len(train_dataloader):
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
""",
        """
steps_per_update = math.ceil(len(train_loader) / args.accum_steps)
scheduler = get_cosine_schedule_with_warmup(optimizer, 100, args.epochs * steps_per_update)
for epoch in range(args.epochs):
    for i, batch in enumerate(train_loader):
        loss = model(**batch).loss / args.accum_steps
        loss.backward()
        if (i + 1) % args.accum_steps == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
""",
        """
max_iter = epochs * epoch_length
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max_iter, eta_min=0)
for data, labels in train_data_loader:
    optimizer.zero_grad()
    criterion(model(data), labels).backward()
    optimizer.step()
    scheduler.step()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
step_scheduler_batch = args.sched in ("onecycle", "cyclic")
if step_scheduler_batch:
    scheduler = build_batch_scheduler(args.sched, optimizer, len(train_loader) * args.epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        if step_scheduler_batch:
            scheduler.step()
    if not step_scheduler_batch:
        scheduler.step()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs - args.warmup_epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    if epoch >= args.warmup_epochs:
        scheduler.step()
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
if args.max_train_steps is None:
    args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer, num_warmup_steps=args.lr_warmup_steps,
                             num_training_steps=args.max_train_steps * accelerator.num_processes)
model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(model, optimizer, train_dataloader, lr_scheduler)
for epoch in range(args.num_train_epochs):
    for batch in train_dataloader:
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[int(args.epochs * 0.5), int(args.epochs * 0.75)])
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
""",
        """
def build_scheduler(optimizer, args):
    if args.sched == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_decay_epochs)
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)


def train(args, model, train_loader, optimizer):
    scheduler = build_scheduler(optimizer, args)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        scheduler.step()
""",
        """
if args.sched == "onecycle":
    scheduler = OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader))
else:
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        if isinstance(scheduler, OneCycleLR):
            scheduler.step()
    if not isinstance(scheduler, OneCycleLR):
        scheduler.step()
""",
    ]
    INVALID = [
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
total = sum(len(d) for d in train_loaders) * args.epochs
lr_scheduler = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=0, num_training_steps=total)
model, optimizer, lr_scheduler, loader = accelerator.prepare(model, optimizer, lr_scheduler, train_loaders[0])
for epoch in range(args.epochs):
    for batch in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(batch))
            optimizer.step()
            lr_scheduler.step()  # LC303
            optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        scheduler.step()  # LC303
""",
        """
scheduler = get_linear_schedule_with_warmup(optimizer, 100, args.epochs * len(train_loader))
for epoch in range(args.epochs):
    for i, batch in enumerate(train_loader):
        loss = model(**batch).loss / args.accum_steps
        loss.backward()
        if (i + 1) % args.accum_steps == 0:
            optimizer.step()
            scheduler.step()  # LC303
            optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_iters)
for it in range(max_iters):
    loss = criterion(*next(batches)) / accum
    loss.backward()
    if (it + 1) % accum == 0:
        optimizer.step()
        scheduler.step()  # LC303
        optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader))
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    if epoch >= args.warmup_epochs:
        scheduler.step()  # LC303
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
if args.max_train_steps is None:
    args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer, num_warmup_steps=args.lr_warmup_steps,
                             num_training_steps=args.max_train_steps * args.gradient_accumulation_steps)
model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(model, optimizer, train_dataloader, lr_scheduler)
for epoch in range(args.num_train_epochs):
    for batch in train_dataloader:
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            lr_scheduler.step()  # LC303
            optimizer.zero_grad()
""",
        """
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_decay_epochs, gamma=0.1)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        scheduler.step()  # LC303
""",
        """
def build_scheduler(optimizer, args):
    if args.sched == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_decay_epochs)
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)


def train(args, model, train_loader, optimizer):
    scheduler = build_scheduler(optimizer, args)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
            scheduler.step()  # LC303
""",
        """
scheduler = LambdaLR(optimizer, partial(warmup_cosine, warmup=args.warmup_epochs, total=args.epochs))
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        scheduler.step()  # LC303
""",
        """
if args.sched == "onecycle":
    scheduler = OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader))
else:
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
for epoch in range(args.epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    if isinstance(scheduler, OneCycleLR):
        scheduler.step()  # LC303
    else:
        scheduler.step()
""",
        """
scheduler = CosineAnnealingLR(optimizer, T_max=config["epochs"])
for epoch in range(config["epochs"]):
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        scheduler.step()  # LC303
""",
        """
warmup = int(0.1 * num_steps)
scheduler = LambdaLR(optimizer, lr_lambda=lambda s: cosine_schedule(s, warmup, num_steps))
for step in range(num_steps):
    loss = model(next(batches)).loss / accum_steps
    loss.backward()
    if (step + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()  # LC303
""",
        """
warmup_steps = max_steps // 20


def lr_lambda(step):
    if step < warmup_steps:
        return step / warmup_steps
    return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (max_steps - warmup_steps)))


scheduler = LambdaLR(optimizer, lr_lambda)
step = 0
while step < max_steps:
    for x, y in loader:
        (criterion(model(x), y) / accum_steps).backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()  # LC303
        step += 1
""",
        """
scheduler = CosineAnnealingLR(optimizer, T_max=max_steps)
step = 0
while True:
    for batch in loader:
        (model(batch).loss / accum_steps).backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()  # LC303
        if step >= max_steps:
            print(f"done after {step} steps")
            sys.exit(0)
        step += 1
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            if training.style not in (Style.PLAIN, Style.GUARDED, Style.MICRO_LOOP, Style.ACCELERATE) and \
                    _shared_condition(training) is None:
                continue
            # an accumulation count of 1 as shipped makes a batch an update; so does an Accelerate loop
            # whose Accelerator is given no accumulation count
            accumulates = training.accumulates and not accumulation_gates_nothing(training, model.index) and (
                training.style is not Style.ACCELERATE or accumulation_setting(model) is not None) and \
                not _parameter_one(training, model.index)
            yield from _set_by_hand(training, model, accumulates)
            for scheduler, stepped in _stepping_units(training, model):
                # `if isinstance(scheduler, OneCycleLR): scheduler.step()` steps only what that class built
                kinds, conds = kind_tests(scheduler.conds, scheduler.receiver)
                if scheduler.has_args or _under_flag(training, scheduler, conds):
                    continue
                built = _constructors(scheduler.receiver, model)
                passed = _passed(scheduler, training, model) if not built else None
                if passed is not None:
                    # built by the caller of this function in another file: read as the caller wrote it,
                    # none of its names being this file's
                    calls = [c for c in passed[1] if lets_through(kinds, last_part(func_name(c) or ""))]
                    horizons = [_length(call, _BLANK) for call in calls]
                    units = [(_parameter_bound_unit(h, training) or _passed_loop_unit(h, training, model.index)
                              or unit_of(h, _BLANK)) if h is not None else None for h in horizons]
                else:
                    # (`if args.LRScheduler == 'cosine': scheduler.step()` steps only what that case built)
                    cases = _option_cases(conds)
                    calls = [c for call in built for c in _as_built(call, model)
                             if lets_through(kinds, last_part(func_name(c) or ""))
                             and not (cases and _other_case(call, cases, model))]
                    horizons = [_length(call, model.index) for call in calls]
                    units = [_horizon_unit(h, training, model.index) if h is not None else None for h in horizons]
                # every scheduler the name may hold must mismatch (`if per_batch: scheduler = OneCycleLR(...)`)
                # a horizon divided by the accumulation count (`len(loader) // gradient_accumulation_steps *
                # epochs`) stepped with an optimizer that steps on every batch: the loop never accumulates,
                # so the schedule ends N times too early
                divided = [_divided_by_accumulation(h, model.index) if h is not None and passed is None else None
                           for h in horizons]
                if units and stepped is Unit.BATCHES and not accumulates and all(
                        u is Unit.UPDATES and d is not None for u, d in zip(units, divided)) and \
                        _never_accumulates(training, scheduler, model):
                    yield self.at(scheduler, f"`{scheduler.receiver}` is stepped on every batch, as the optimizer is, "
                                             f"but its horizon `{source(horizons[0])}` counts optimizer steps of "
                                             f"`{source(divided[0])}` batches (the loop never accumulates): with "
                                             f"`{source(divided[0])}` > 1 the schedule ends that many times too early"
                                             f"{_built_by(scheduler, model)}")
                    continue
                nest = _inner_loop(training, scheduler, horizons, model.index) \
                    if stepped is Unit.BATCHES and passed is None and units and all(u is Unit.BATCHES for u in units) \
                    else None
                if nest is not None:
                    inner, outer = nest
                    yield self.at(scheduler, f"`{scheduler.receiver}` is stepped on every iteration of `for ... in "
                                             f"{source(inner.node.iter)}`, which runs inside `for ... in "  # type: ignore[union-attr]
                                             f"{source(outer.node.iter)}`, whose iterations its horizon "  # type: ignore[union-attr]
                                             f"`{source(horizons[0])}` counts: it steps as many times per outer "
                                             f"iteration as the inner loop runs, and the schedule ends that many times "
                                             f"early{_built_by(scheduler, model)}")
                    continue
                if units and all(u is not None and _mismatch(u, stepped, accumulates) for u in units) \
                        and not _shipped_without_accumulation(units, stepped, training, model):
                    what = _DECAY_WORDS.get(last_part(func_name(calls[0]) or ""), "horizon") \
                        if horizons[0] is decay_expr(calls[0]) else "horizon"
                    counts = "count" if what == "milestones" else "counts"
                    yield self.at(scheduler, f"`{scheduler.receiver}` is stepped once per {_ONE[stepped]} "
                                             f"but its {what} {_shown(horizons[0], what)} {counts} {units[0].value}"
                                             f"{passed[0] if passed else _built_by(scheduler, model)}")
                    continue
                # a scheduler bound in several configurations (`if opt.scheduler == "fixed": FixedScheduler(...)
                # elif ...: WarmupLinearScheduler(..., total=opt.total_steps)`): the one with a horizon
                # that mismatches is reported where each other one has no horizon or takes the user's
                variant = _mismatched_variant(calls, horizons, units, stepped, accumulates)
                if variant is not None:
                    yield self.at(scheduler, f"`{scheduler.receiver}` is stepped once per {_ONE[stepped]} "
                                             f"but its horizon `{source(horizons[variant])}` counts "
                                             f"{units[variant].value} in the configuration that builds "  # type: ignore[union-attr]
                                             f"`{last_part(func_name(calls[variant]) or '')}` over it (every other "
                                             f"configuration builds a schedule with no horizon, or the same one over "
                                             f"a horizon the user sets)"
                                             f"{passed[0] if passed else _built_by(scheduler, model)}")
                    continue
                # a warmup counted in other units than the stepping (`warmup_steps * gradient_accumulation_steps`
                # for a scheduler stepped once per update): the ramp lasts N times longer or shorter
                warmups = [warmup_expr(call) for call in calls]
                # a warmup that is a share of the horizon (`num_batches * warmup_ratio`) counts what it counts
                wunits = [units[i] if w is not None and h is not None and passed is None
                          and _share_of(w, h, model.index) else
                          unit_of(w, _BLANK if passed else model.index) if w is not None else None
                          for i, (w, h) in enumerate(zip(warmups, horizons))]
                if wunits and all(u is not None and _mismatch(u, stepped, accumulates) for u in wunits) \
                        and not _shipped_without_accumulation(wunits, stepped, training, model):
                    yield self.at(scheduler, f"`{scheduler.receiver}` is stepped once per {_ONE[stepped]} "
                                             f"but its warmup `{source(warmups[0])}` counts {wunits[0].value}"
                                             f"{passed[0] if passed else _built_by(scheduler, model)}")
                    continue
                # Accelerate steps a prepared scheduler once per process: a horizon that leaves the process
                # count out of a prepared scheduler, or puts it in for an unprepared one, fits one process only
                # (a prepared scheduler stepped once per epoch is stepped once per process too, whether or not
                # the batch loop enters `accumulate()`)
                if training.style in (Style.ACCELERATE, Style.PLAIN, Style.GUARDED) and passed is None and \
                        stepped is not None and \
                        not (model.project is not None and model.project.single_process_launches):
                    said = _process_count_mismatch(scheduler, stepped, calls, horizons, warmups, units, training, model)
                    if said is not None:
                        yield self.at(scheduler, said + _built_by(scheduler, model))


def _set_by_hand(training: TrainingLoop, model: FileModel, accumulates: bool) -> Iterator[Violation]:
    """A learning rate the loop sets from a schedule function of the file (``lr = get_lr(global_step,
    max_lr, len(train_loader) * epochs)``, then ``optimizer.param_groups[0]['lr'] = lr``) whose step
    count counts optimizer steps and whose horizon batches, or the other way round."""
    if not accumulates or not isinstance(training.loop.node, (cst.For, cst.While)):
        return
    said: set[tuple[str, str, str]] = set()  # one finding for the rates of several parameter groups
    for rate in set_rates(training.loop.node, model.index):
        key = (rate.function, source(rate.step), source(rate.horizon))
        if key in said:
            continue
        counted = _counter_unit(rate.step, training)
        horizon = rate.horizon
        unit = _horizon_unit(horizon, training, model.index) if counted is not None else None
        if unit is None or {unit, counted} != {Unit.BATCHES, Unit.UPDATES}:
            continue
        effect = "reaches only 1/N of its length" if counted is Unit.UPDATES else "ends N times too early"
        said.add(key)
        yield Violation(rate.call, rate.stmt, f"`{rate.function}()` sets the learning rate by `{source(rate.step)}`, "
                                              f"which counts {counted.value}, but its horizon `{source(horizon)}` "  # type: ignore[union-attr]
                                              f"counts {unit.value}: the schedule {effect}")


def _counter_unit(step: cst.BaseExpression, training: TrainingLoop) -> Unit | None:
    """What a step count advances with: the batch loop's own index counts batches; a name the loop adds
    to only where the optimizer steps (``global_step += 1`` in the step branch) optimizer steps, one it
    adds to on every iteration batches."""
    if type(step) is not cst.Name:
        return None
    name = step.value
    target = training.loop.assignments[0] if training.loop.assignments else None
    if target is not None and target.op == "for" and name in target.names:
        index = training.loop.node.iter if isinstance(training.loop.node, cst.For) else None
        return Unit.BATCHES if index is not None and func_name(index) == "enumerate" \
            and target.names[0] == name else None
    added = [a for a in training.loop.assignments if a.names == (name,)]
    if not added or any(a.op != "AddAssign" or int_value(a.value) != 1 for a in added):
        return None
    guards = [training.reader.guard(a.conds, a.order) for a in added]
    if all(g.periodic for g in guards):
        return Unit.UPDATES
    return Unit.BATCHES if all(g.always for g in guards) else None


def _inner_loop(training: TrainingLoop, scheduler: Event, horizons: list[cst.BaseExpression | None],
                index: Index) -> tuple[Loop, Loop] | None:
    """The loop in which the scheduler steps on every iteration (PPO's ``for _ in range(ppo_epochs):``,
    or the mini-batches of a rollout) where it runs inside a loop over another loader
    whose length the horizon counts (``num_epochs * len(loader)``) and the horizon names nothing of
    that inner loop's bound: each batch takes several scheduler steps. (inner, outer), else None."""
    loop = training.loop
    if scheduler.loop is not loop or not isinstance(loop.node, cst.For) or not all(h is not None for h in horizons):
        return None
    if is_data_iterable(loop.node.iter):
        return None  # the scheduler's own loop goes over a loader's batches: the outer one repeats the passes
    bound = {last_part(n) for n in names_in(loop.node.iter)} - _BUILTIN_NAMES
    outer = loop.parent
    while outer is not None and outer.is_loop and outer.function is loop.function:
        if is_data_loop(outer) and isinstance(outer.node, cst.For):
            loaders = {last_part(n) for n in names_in(outer.node.iter)} - _BUILTIN_NAMES
            read = [_names_followed(h, index) for h in horizons]  # type: ignore[arg-type]
            if loaders and not loaders & bound and all(loaders & r and not bound & r for r in read):
                return loop, outer
            return None
        outer = outer.parent
    return None


_BUILTIN_NAMES = frozenset({"range", "len", "enumerate", "zip", "tqdm", "args", "self", "cfg", "config", "int", "min",
                            "max", "math", "ceil"})


def _names_followed(expr: cst.BaseExpression, index: Index, depth: int = 0) -> set[str]:
    """The last parts of the names ``expr`` reads, and of those their one binding in the file reads."""
    found = {last_part(n) for n in names_in(expr)}
    if depth < 3:
        for name in list(found):
            values = index.values.get(name, [])
            if len(values) == 1:
                found |= _names_followed(values[0], index, depth + 1)
    return found


# schedules with no horizon: their learning rate does not run out, whatever the stepping
_NO_HORIZON = {"ExponentialLR", "ReduceLROnPlateau", "MultiplicativeLR", "ConstantLR", "get_constant_schedule"}


def _process_count_mismatch(scheduler: Event, stepped: Unit, calls: list[cst.Call],
                            horizons: list[cst.BaseExpression | None], warmups: list[cst.BaseExpression | None],
                            units: list[Unit | None], training: TrainingLoop, model: FileModel) -> str | None:
    """The message where the horizon's process count contradicts how Accelerate steps the scheduler
    (``loopcheck.model.process_count``): a scheduler left out of ``prepare`` whose horizon (or warmup) is
    multiplied by ``accelerator.num_processes`` in every configuration, or a prepared one, stepped once
    per process on every optimizer step, whose horizon counts one process's optimizer steps (a setting,
    not multiplied by the process count, in an ``accumulate()`` loop; or, in any loop, a count worked out
    from a loader's length after ``prepare`` sharded it) in a configuration, where no configuration
    multiplies it.
    None otherwise. A prepared scheduler stepped once per epoch is stepped once per process too (the epoch's
    last batch syncs): a horizon counted in epochs, not multiplied by the process count, runs out P times
    too early."""
    name, index = scheduler.receiver, model.index
    accelerate_loop = training.style is Style.ACCELERATE
    if left_unprepared(model, name):
        if not accelerate_loop and stepped is not Unit.EPOCHS:
            return None
        for what, lengths in (("horizon", horizons), ("warmup", warmups)):
            if lengths and all(h is not None and process_scaled(h, index) for h in lengths):
                effect = "it reaches only 1/P of its length" if what == "horizon" else "its warmup lasts P times longer"
                return (f"`{name}` is left out of `accelerator.prepare`, so it steps once per call, but its {what} "
                        f"`{source(lengths[0])}` is multiplied by the process count, as for a prepared scheduler "
                        f"(which Accelerate steps once per process): on P > 1 processes the schedule runs P times "
                        f"too slow: {effect}")
        return None
    if stepped is Unit.EPOCHS:
        return _epochs_per_process(name, horizons, warmups, units, model)
    if not model.roles.is_prepared(name) or scheduler_gated(model, name) is not True or \
            not steps_per_process(model) or stepped not in (Unit.UPDATES, Unit.BATCHES):
        return None
    if any(h is not None and process_scaled(h, index) for h in (*horizons, *warmups)):
        return None  # the file counts processes in some configuration: the others are its choice
    for i, (call, horizon) in enumerate(zip(calls, horizons)):
        if horizon is None:
            continue
        # a setting counted per process (read in `accumulate()` loops stepped per update), or, in any loop
        # (outside `accumulate()` every call is an optimizer step), a count of a loader taken after
        # `prepare` sharded it
        setting = accelerate_loop and stepped is Unit.UPDATES and per_process_count(horizon, index)
        loader = None if setting else sharded_length(horizon, call, model)
        if not setting and loader is None:
            continue
        unit = units[i] if units[i] is stepped else \
            _per_update_bound(horizon, training, index) if stepped is Unit.UPDATES else None
        if unit is not stepped:
            continue
        which = f" in the configuration that builds `{last_part(func_name(call) or '')}`" if len(calls) > 1 else ""
        counted = (f", worked out from `len({loader})` after `prepare` sharded that loader," if loader is not None
                   else "")
        return (f"`{name}` is handed to `accelerator.prepare`, which steps it once per process on every "
                f"{_ONE[stepped]} (no `split_batches=True`), but its horizon `{source(horizon)}`{which}{counted} "
                f"counts {stepped.value} of one process, not multiplied by `accelerator.num_processes`: on P > 1 "
                f"processes the schedule runs P times too fast and ends after 1/P of training")
    return None


def _epochs_per_process(name: str, horizons: list[cst.BaseExpression | None],
                        warmups: list[cst.BaseExpression | None], units: list[Unit | None],
                        model: FileModel) -> str | None:
    """A prepared scheduler stepped once per epoch whose horizon counts epochs in every configuration
    (``CosineAnnealingLR(optimizer, T_max=args.epochs)``): Accelerate steps it once per process on each
    call (``loopcheck.model.process_count``), so each epoch advances it P epochs. Not where the file's
    Accelerator may step it once (``split_batches``, ``step_scheduler_with_optimizer=False``, settings
    from elsewhere) or where a horizon or warmup is multiplied by the process count."""
    if not model.roles.is_prepared(name) or not steps_per_process(model) or \
            any(h is not None and process_scaled(h, model.index) for h in (*horizons, *warmups)):
        return None
    if not units or any(h is None or u is not Unit.EPOCHS for h, u in zip(horizons, units)):
        return None
    return (f"`{name}` is handed to `accelerator.prepare`, which steps it once per process on every call "
            f"(no `split_batches=True`), and it is stepped once per epoch over a horizon "
            f"`{source(horizons[0])}` of epochs: on P > 1 processes every epoch advances it P epochs, so the "
            f"schedule runs P times too fast and its horizon is spent after 1/P of the epochs")


def _per_update_bound(horizon: cst.BaseExpression, training: TrainingLoop, index: Index) -> Unit | None:
    """A horizon the loop's bound shows to count optimizer steps: ``for step in range(steps *
    gradient_accumulation_steps)`` (the other factor counts updates), or ``if done >= max_steps: break``
    on a counter of real optimizer steps; read through a name bound once (``steps =
    self._config.optimization.steps``) and across two names of one configuration object."""
    values = index.values.get(horizon.value, []) if isinstance(horizon, cst.Name) else []
    shown = values[0] if len(values) == 1 else horizon
    # `tot = cfg.num_batches * cfg.grad_accumulation_factor; for i in range(tot):`: the bound's one value
    bounds = [times_accumulation(_bound_once(b, index)) for b in _loop_bounds(training.loop) if b is not None]
    counted = updates_bound(training.loop)
    if any(b is not None and same_setting(b, shown) for b in (*bounds, counted)):
        return Unit.UPDATES
    return None


def _share_of(warmup: cst.BaseExpression, horizon: cst.BaseExpression, index: Index) -> bool:
    """``warmup`` is the horizon times a ratio or divided by a number (``cfg.num_batches *
    cfg.warmup_ratio`` beside a horizon ``cfg.num_batches``), read through a name bound once, a cast
    around it too (``int(total_steps * warmup_ratio)``)."""
    value = _bound_once(warmup, index)
    while type(value) is cst.Call and last_part(func_name(value) or "") in ("int", "round", "ceil", "floor") \
            and len(value.args) == 1:
        value = value.args[0].value
    return isinstance(value, cst.BinaryOperation) and isinstance(
        value.operator, (cst.Multiply, cst.Divide, cst.FloorDivide)) and (
        same(value.left, horizon) or isinstance(value.operator, cst.Multiply) and same(value.right, horizon))


def _bound_once(expr: cst.BaseExpression, index: Index) -> cst.BaseExpression:
    """The one value the file binds the name ``expr`` to, or ``expr`` itself."""
    values = index.values.get(expr.value, []) if isinstance(expr, cst.Name) else []
    return values[0] if len(values) == 1 else expr


def _mismatched_variant(calls: list[cst.Call], horizons: list[cst.BaseExpression | None], units: list[Unit | None],
                        stepped: Unit | None, accumulates: bool) -> int | None:
    """The index of a configuration whose horizon mismatches the stepping, where the scheduler may be
    built in several and every other one has no horizon (``FixedScheduler(optimizer)``, built from the
    optimizer alone) or is the same schedule over a horizon the user sets as given
    (``scheduler_steps=opt.scheduler_steps`` where ``--scheduler_steps`` is given, ``opt.total_steps``
    otherwise): the mismatched schedule is the only one with a horizon of its own. Another schedule
    with a horizon (in the stepping's unit, in one the code does not say, or not read) silences it.
    None otherwise."""
    if len(calls) < 2:
        return None
    mismatched = [i for i, u in enumerate(units) if u is not None and _mismatch(u, stepped, accumulates)]
    if not mismatched:
        return None
    classes = {last_part(func_name(calls[i]) or "") for i in mismatched}
    for i, (call, horizon, unit) in enumerate(zip(calls, horizons, units)):
        if i in mismatched:
            continue
        kind = last_part(func_name(call) or "")
        if horizon is None and (_optimizer_only(call) or kind in _NO_HORIZON):
            continue
        if horizon is not None and unit is None and kind in classes and _setting(horizon):
            continue
        return None
    return mismatched[0]


def _optimizer_only(call: cst.Call) -> bool:
    """Built from the optimizer alone (``FixedScheduler(optimizer)``, ``get_constant_schedule(opt)``)."""
    return len(call.args) == 1 and call.args[0].keyword is None and call.args[0].star == "" or \
        len(call.args) == 1 and call.args[0].keyword is not None and call.args[0].keyword.value == "optimizer"


def _setting(horizon: cst.BaseExpression) -> bool:
    """A setting of the options object, as given (``opt.scheduler_steps``, ``args.max_steps``)."""
    name = dotted(horizon)
    return name is not None and name.count(".") == 1 and name.split(".")[0] not in ("self", "None")


def _horizon_unit(horizon: cst.BaseExpression, training: TrainingLoop, index: Index) -> Unit | None:
    """What a horizon this file writes counts: the loop's own bound counts its iterations, whatever its
    name says (``range(max_epoch)``), else what its parts say."""
    return (_loop_unit(horizon, training, index) or _parameter_bound_unit(horizon, training)
            or _per_update_bound(horizon, training, index) or unit_of(horizon, index, counts=training.count_names))


def _passed_loop_unit(horizon: cst.BaseExpression, training: TrainingLoop, index: Index) -> Unit | None:
    """``_loop_unit`` of a horizon a caller built from the options object it hands the loop's function
    under the same name (``opt.total_steps`` built from ``opt``, and ``while step < opt.total_steps:``
    in ``train(..., opt, ...)``)."""
    function, name = training.loop.function, dotted(horizon)
    if function is None or name is None or name.split(".")[0] not in param_names(function.params):
        return None
    return _loop_unit(horizon, training, index)


def _parameter_one(training: TrainingLoop, index: Index) -> bool:
    """The accumulation count is a parameter of the loop's function whose default is 1, and no call
    of this file passes it (``def do_train(..., gradient_accumulation_steps=1)`` called by an entry
    script that never sets it): each batch is an update as the code ships, whatever the loop could do."""
    count, function = training.modulus, training.loop.function
    if not isinstance(count, cst.Name) or function is None:
        return False
    params = (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
    param = next((p for p in params if p.name.value == count.value), None)
    if param is None or param.default is None or int_value(param.default) != 1:
        return False
    return all(int_value(v) == 1 for v in index.arguments.get(f"{function.name.value}({count.value})", []))


def _option_cases(conds: tuple[Cond, ...]) -> dict[str, object]:
    """``{"args.LRScheduler": "cosine"}`` for the condition ``args.LRScheduler == 'cosine'`` (also a
    conjunct of one): the case of an option a statement runs under."""
    found: dict[str, object] = {}
    for cond in conds:
        for part in (conjuncts(cond.test) if cond.test is not None and not cond.negated else []):
            case = _case(part)
            if case is not None:
                found[case[0]] = case[1]
    return found


def _case(test: cst.BaseExpression) -> tuple[str, object] | None:
    """(``args.mode``, ``"cosine"``) for ``args.mode == 'cosine'`` (either side the literal)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 \
            or type(test.comparisons[0].operator) is not cst.Equal:  # type: ignore[attr-defined]
        return None
    left, right = test.left, test.comparisons[0].comparator  # type: ignore[attr-defined]
    for name, value in ((left, right), (right, left)):
        if dotted(name) is not None and type(value) in (cst.SimpleString, cst.Integer):
            return dotted(name), value.evaluated_value if type(value) is cst.SimpleString else int_value(value)  # type: ignore[attr-defined, return-value]
    return None


def _other_case(call: cst.Call, cases: dict[str, object], model: FileModel) -> bool:
    """``call`` is built only in the branch of another case of one of the options ``cases`` names
    (``if args.LRScheduler == 'multi_step': scheduler = MultiStepLR(...)``, the step under ``== 'cosine'``)."""
    for node in walk(model.module, into_functions=True):
        if type(node) is cst.If and (case := _case(node.test)) is not None and case[0] in cases \
                and case[1] != cases[case[0]] and any(n is call for n in walk(node.body, into_functions=True)):  # type: ignore[attr-defined]
            return True
    return False


def _constructors(name: str | None, model: FileModel, depth: int = 0) -> list[cst.Call]:
    """The calls that build scheduler ``name``: scheduler constructors, calls of a function or
    method of this file that returns one, whatever it is called (``self._make_sched()``), and the
    constructors a factory returns in a tuple that the file unpacks (``optimizer, scheduler =
    set_optim(opt, model)``), with the call's arguments in place; for a name bound once to another
    (``scheduler = cosine``), that one's."""
    found = model.roles.constructors(name, Role.SCHEDULER)
    if name:
        found += [c for c in model.roles.constructed.get(last_part(name), [])
                  if c not in found and _own_factory(c, model) is not None]
        unpacked = [c for c, _ in _unpacked(name, model)]
        if unpacked:
            # the factory's own constructor (`scheduler = WarmupLinearScheduler(..., scheduler_steps)`
            # inside `set_optim`) is read as the call that ran it, its parameters filled in
            factories = {own_call_name(call) for call, _ in model.roles.unpacked.get(last_part(name), [])}
            inside = {id(n) for f in factories if f for d in model.index.functions.get(f, []) for n in walk(d)}
            found = [c for c in found if id(c) not in inside] + unpacked
        if not found and depth < 3:
            # `scheduler = cosine` after `cosine = CosineAnnealingLR(...)`: the schedule the alias holds
            held = {v.value if type(v) is cst.Name else None for v in model.index.values.get(last_part(name), [])}
            alias = held.pop() if len(held) == 1 else None
            if alias is not None and alias != last_part(name):
                found = _constructors(alias, model, depth + 1)
        if not found and model.roles.is_prepared(name):
            # `self._optimizer, self._lr_scheduler = self._accelerator.prepare(optimizer, lr_scheduler)`:
            # the prepared scheduler is the one built under the name handed to `prepare` at its position
            found = [c for handed in model.roles.prepared_from.get(last_part(name), []) if handed != name
                     for c in _constructors(handed, model)]
    return found


def _unpacked(name: str, model: FileModel) -> list[tuple[cst.Call, str]]:
    """(constructor, `` (built by `set_optim`, src/util.py:130)``) for each scheduler that a
    project function (of this file or another module) returns at the tuple position the file
    unpacks into ``name``; [] where one such binding is not read (its scheduler is not known)."""
    bindings = model.roles.unpacked.get(last_part(name), [])
    found: list[tuple[cst.Call, str]] = []
    resuming = _resuming(model) if len(bindings) > 1 else set()
    for call, position in bindings:
        if id(call) in resuming:
            continue  # built inside a function that restores a saved run: the configuration it was saved in
        facts, by = None, ""
        own = _own_factory(call, model, position)
        if own is not None:
            facts, by = own[1], f" (built by `{own[0]}`)"
        elif model.project is not None:
            summary = model.project.summary(call, model.roles) or model.project.dotted_summary(call)
            schedules = dict(summary.facts.schedules_at).get(position) if summary is not None else None
            if schedules:
                facts = FunctionFacts(line=0, params=summary.facts.params, schedules=schedules)  # type: ignore[union-attr]
                by = f" (built by `{summary.name}`, {summary.where})"  # type: ignore[union-attr]
        built = _filled(call, facts) if facts is not None else None
        if built is None and len(bindings) > 1 and RESUME.search(own_call_name(call) or dotted(call.func) or ""):
            # `optimizer, scheduler, step = load(path, model)` beside the fresh `set_optim(opt, model)`:
            # resuming restores the scheduler the same code built and saved, one configuration with it
            continue
        if built is None:
            return []
        found.extend((c, by) for c in built)
    return found


def _resuming(model: FileModel) -> set[int]:
    """The calls inside this file's functions that restore a saved run (named by ``RESUME``)."""
    return {id(n) for name, defs in model.index.functions.items() if RESUME.search(name)
            for d in defs for n in walk(d) if isinstance(n, cst.Call)}


def _own_factory(call: cst.Call, model: FileModel, position: int | None = None) -> tuple[str, FunctionFacts] | None:
    """The function or method of this file that ``call`` runs (``build_scheduler(optimizer, args)``,
    ``self.build_scheduler()``), where it returns a scheduler (at ``position`` of the tuple it
    returns, if given): its name and what it returns."""
    name = own_call_name(call)
    defs = model.index.functions.get(name, []) if name is not None else []
    if len(defs) != 1:
        return None
    text = statement_text(defs[0]) or source(defs[0])  # a tree built from `ast` has no libcst code
    if SCHEDULE_TEXT.search(text) is None:
        return None
    params, schedules = own_factory(text, isinstance(call.func, cst.Attribute), position)
    return (name, FunctionFacts(line=0, params=params, schedules=schedules)) if schedules else None


def _as_built(call: cst.Call, model: FileModel) -> list[cst.Call]:
    """The scheduler constructors ``call`` stands for: itself, or, for a function that returns a
    scheduler (``build_scheduler(optimizer, args)``, in this file or another module of the project),
    each constructor it returns with the call's arguments in place of its parameters
    (``CosineAnnealingLR(optimizer, T_max=args.epochs)``), read as if this file had written it. Where
    a parameter is not passed (its default is the function's), the call stays as it is: no horizon known."""
    if _length(call, model.index) is not None or warmup_expr(call) is not None:
        return [call]  # read as written (`get_linear_schedule_with_warmup` vendored into the project)
    own = _own_factory(call, model)
    facts = own[1] if own is not None else None
    if facts is None and model.project is not None:
        found = model.project.summary(call, model.roles)
        facts = found.facts if found is not None else None
    built = _filled(call, facts) if facts is not None else None
    return built if built is not None else [call]


def _filled(call: cst.Call, facts: FunctionFacts) -> list[cst.Call] | None:
    """Each constructor of ``facts.schedules`` with ``call``'s arguments in place of the function's
    parameters; None where one cannot be written (a parameter not passed, a ``*args``)."""
    if not facts.schedules or any(a.star for a in call.args):
        return None
    args = {i: source(a) for i, a in arguments(call, facts).items()}
    built = []
    for marked in facts.schedules:
        text = as_called(marked, args)
        if text is None:
            return None
        try:
            parsed = cst.parse_expression(text)
        except cst.ParserSyntaxError:
            return None
        if not isinstance(parsed, cst.Call):
            return None
        built.append(parsed)
    return built


_BLANK = Index()  # what a file that names nothing says: a caller's constructor is read by its own words


def _passed(scheduler: Event, training: TrainingLoop, model: FileModel) -> tuple[str, list[cst.Call]] | None:
    """Where ``scheduler`` is a parameter of the top-level function holding the loop and every call
    of that function in the project passes one built by a scheduler constructor: the message's
    `` (built at main.py:10 and passed to `train_one_epoch`)`` and the constructors, as their callers
    wrote them. None where this file builds it, or any caller passes what is not known."""
    function = training.loop.function
    name = scheduler.receiver
    if model.project is None or function is None or not name or training.style is Style.ACCELERATE:
        return None  # a prepared scheduler steps as the caller's Accelerator decides
    if "." not in name and function in model.module.body:
        callee = function.name.value  # `scheduler`, a parameter of a top-level function
    elif name.startswith("self.") and name.count(".") == 1:
        # `self.scheduler`, kept by the `__init__` of the top-level class whose method holds the loop
        callee = next((stmt.name.value for stmt in model.module.body
                       if isinstance(stmt, cst.ClassDef) and any(m is function for m in stmt.body.body)), None)
    else:
        return None
    found = model.project.passed_schedulers.get((callee, name)) if callee else None
    if not found:
        return None
    calls = []
    for _, text in found:
        try:
            call = cst.parse_expression(text)
        except cst.ParserSyntaxError:
            return None
        if not isinstance(call, cst.Call):
            return None
        calls.append(call)
    places = ", ".join(dict.fromkeys(where for where, _ in found))
    return f" (built at {places} and passed to `{callee}`)", calls


def _built_by(scheduler: Event, model: FileModel) -> str:
    """`` (built by `build_scheduler`, utils.py:4)`` where a function of another module built it,
    `` (built by `build_scheduler`)`` where one of this file did."""
    unpacked = _unpacked(scheduler.receiver, model) if scheduler.receiver else []
    if unpacked:
        return unpacked[0][1]
    for call in _constructors(scheduler.receiver, model):
        if _as_built(call, model) == [call]:
            continue
        own = _own_factory(call, model)
        if own is not None:
            return f" (built by `{own[0]}`)"
        found = model.project.summary(call, model.roles) if model.project is not None else None
        if found is not None:
            return f" (built by `{found.name}`, {found.where})"
    return ""


_DECAY_WORDS = {"StepLR": "step size", "MultiStepLR": "milestones", "SequentialLR": "milestones",
                "CyclicLR": "half cycle"}


def _shown(horizon: cst.BaseExpression | None, what: str) -> str:
    """The horizon as the message quotes it: where it is the several lengths a schedule function is
    given (``partial(lr_lambda, num_warmup_steps, num_training_steps)``, each in the same unit), the
    shortest of them that is not a warmup, and how many there are."""
    if what == "horizon" and isinstance(horizon, cst.List) and len(horizon.elements) > 1:
        texts = [source(e.value) for e in horizon.elements]
        lengths = [text for e, text in zip(horizon.elements, texts)
                   if not (dotted(e.value) is not None and "warmup" in text.lower())]
        shortest = min(lengths or texts, key=len)
        return f"`{shortest}` (one of the {len(horizon.elements)} lengths its schedule function is given)"
    return f"`{source(horizon)}`" if horizon is not None else "``"


def _length(call: cst.Call, index: Index) -> cst.BaseExpression | None:
    """What sets how far the schedule goes: its horizon, or where a step schedule decays
    (``StepLR(optimizer, step_size=args.lr_decay_epochs)`` counts epochs)."""
    horizon = horizon_expr(call, index)
    return horizon if horizon is not None else decay_expr(call)


def _loop_unit(horizon: cst.BaseExpression, training: TrainingLoop, index: Index) -> Unit | None:
    """A horizon that is the bound of the loop itself: ``for it in range(max_iters)`` counts
    iterations of that loop (micro-batches of the batch loop, optimizer steps of a micro-step loop's
    parent); so does the bound of a stop on a counter the batch loop adds 1 to on every iteration,
    also a bound the trainer keeps (``self.total_steps``, set to ``args.total_steps`` and nothing else),
    and the part of it after a warmup (``max(1, MAX_STEPS - warmup_steps)``, also bound once to a name,
    ``decay_steps = MAX_STEPS - warmup_steps``)."""
    held = _bound_once(horizon, index)
    if type(held) is cst.BinaryOperation and type(held.operator) is cst.Subtract:
        horizon = held  # `decay_steps = max_steps - warmup_steps`, then `T_max=decay_steps`
    horizon = _after_warmup(horizon, index)
    if any(same(horizon, bound) or _kept_as(bound, horizon, index) or _share_of_bound(horizon, bound)
           or _lengths_of_bound(horizon, bound, index) for bound in _loop_bounds(training.loop)) \
            or _all_passes(horizon, training.loop):
        return Unit.BATCHES
    if training.style is Style.MICRO_LOOP and (same(horizon, _range_bound(training.step_loop))
                                               or _all_passes(horizon, training.step_loop)
                                               or _counts_step_loop_data(horizon, training, index)):
        return Unit.UPDATES
    return None


def _counts_step_loop_data(horizon: cst.BaseExpression, training: TrainingLoop, index: Index) -> bool:
    """The only data the horizon counts is what the loop that steps goes over, one batch per optimizer
    step (``len(self.train_dataloader) * epochs`` for ``for data in self.train_dataloader:`` whose
    ``training_step(data)`` splits each batch into micro-batches): it counts optimizer steps."""
    loop = training.step_loop
    data = unwrap_iterable(loop.iter) if loop.iter is not None and is_data_loop(loop) else None
    if data is None or dotted(data) is None:
        return False
    # the horizon and the one value of each name it reads, a few assignments deep
    read = [horizon, *(held[0] for name in expanded_names(horizon, index)
                       if len(held := index.values.get(last_part(name), [])) == 1)]
    lengths = [sub.args[0].value for node in read for sub in walk(node)
               if type(sub) is cst.Call and func_name(sub) == "len" and len(sub.args) == 1]
    return bool(lengths) and all(same(length, data) for length in lengths)


def _lengths_of_bound(horizon: cst.BaseExpression, bound: cst.BaseExpression | None, index: Index) -> bool:
    """The lengths a schedule function is given (``lambda step: cosine(step, warmup, num_steps)``) or
    divides its step count by (``(step - warmup_steps) / (max_steps - warmup_steps)``), one of them
    the loop's bound and each other a share of it (``warmup = int(0.1 * num_steps)``): the schedule
    runs over the loop's iterations, its warmup a part of them."""
    if type(horizon) is not cst.List or bound is None:
        return False
    values = [_after_warmup(e.value, index) for e in horizon.elements]  # `(max_steps - warmup_steps)` too
    if not any(same(value, bound) for value in values):
        return False
    for value in values:
        held = index.values.get(value.value, []) if type(value) is cst.Name else []
        if not (_share_of_bound(value, bound) or len(held) == 1 and _share_of_bound(held[0], bound)):
            return False
    return True


def _after_warmup(horizon: cst.BaseExpression, index: Index) -> cst.BaseExpression:
    """``A`` for ``max(1, A - warmup_steps)`` (a clamp or cast of it too), where the warmup is named so
    or is a share of ``A`` (``warmup_steps = int(A * ratio)``): the steps after the warmup count what
    ``A`` counts; else ``horizon`` itself."""
    while type(horizon) is cst.Call and last_part(func_name(horizon) or "") in ("max", "min", "int", "round") \
            and (values := [a.value for a in horizon.args if int_value(a.value) is None]) and len(values) == 1:  # type: ignore[attr-defined]
        horizon = values[0]
    if type(horizon) is not cst.BinaryOperation or type(horizon.operator) is not cst.Subtract:  # type: ignore[attr-defined]
        return horizon
    total, warmup = horizon.left, horizon.right  # type: ignore[attr-defined]
    name = dotted(warmup)
    # (the share itself where a factory's text is read as called: `total - int(total * ratio)`)
    shares = index.values.get(last_part(name), []) if name is not None else [warmup]
    if name is not None and "warmup" in last_part(name).lower() or len(shares) == 1 and any(
            same(n, total) for n in walk(shares[0]) if type(n) in (cst.Name, cst.Attribute)):
        return total
    return horizon


def _share_of_bound(horizon: cst.BaseExpression, bound: cst.BaseExpression | None) -> bool:
    """Milestones or a step size that are fixed shares of the loop's own bound (``[int(args.epochs *
    0.5), int(args.epochs * 0.75)]`` for ``for _ in range(args.epochs):``, ``epochs // 3``): they count
    that loop's iterations too, whatever the loop steps per iteration (a whole-batch fit)."""
    if bound is None:
        return False
    if isinstance(horizon, (cst.List, cst.Tuple)):
        return bool(horizon.elements) and all(_share_of_bound(e.value, bound) for e in horizon.elements)
    while True:
        if same(horizon, bound):
            return True
        if isinstance(horizon, cst.Call) and last_part(func_name(horizon) or "") in ("int", "round", "floor", "ceil") \
                and len(horizon.args) >= 1:
            horizon = horizon.args[0].value
        elif isinstance(horizon, cst.BinaryOperation) and isinstance(
                horizon.operator, (cst.Multiply, cst.Divide, cst.FloorDivide)):
            if isinstance(horizon.right, (cst.Integer, cst.Float)):
                horizon = horizon.left
            elif isinstance(horizon.left, (cst.Integer, cst.Float)) and isinstance(horizon.operator, cst.Multiply):
                horizon = horizon.right
            else:
                return False
        else:
            return False


def _all_passes(horizon: cst.BaseExpression, loop: Loop) -> bool:
    """``epochs * iter_per_epoch`` where ``loop`` runs ``range(iter_per_epoch)`` inside ``for epoch in
    range(epochs)``: the horizon counts the loop's iterations over the whole run, whatever the names say."""
    if not isinstance(horizon, cst.BinaryOperation) or not isinstance(horizon.operator, cst.Multiply) \
            or loop.parent is None or not loop.parent.is_loop:
        return False
    inner, outer = _range_bound(loop), _range_bound(loop.parent)
    return inner is not None and outer is not None and (
        same(horizon.left, outer) and same(horizon.right, inner) or same(horizon.left, inner)
        and same(horizon.right, outer))


def _kept_as(bound: cst.BaseExpression | None, horizon: cst.BaseExpression, index: Index) -> bool:
    """``bound`` is an attribute (``self.total_steps``) that the file sets only to ``horizon``
    (``self.total_steps = args.total_steps`` in ``__init__``)."""
    if not isinstance(bound, cst.Attribute):
        return False
    held = index.values.get(bound.attr.value, [])
    return bool(held) and all(same(value, horizon) for value in held)


def _parameter_bound_unit(horizon: cst.BaseExpression, training: TrainingLoop) -> Unit | None:
    """A horizon named as the training loop's bound where that bound is a parameter of the function
    holding the loop (``T_max=args.max_epoch`` built by the caller, ``for epoch in range(max_epoch):``
    in ``pretrain(..., max_epoch)``): the caller's count of that loop's iterations, read as
    ``_loop_unit`` reads a bound the horizon spells alike."""
    function, name = training.loop.function, dotted(horizon)
    if function is None or name is None:
        return None
    params = param_names(function.params)
    for bound in _loop_bounds(training.loop):
        if isinstance(bound, cst.Name) and bound.value in params and bound.value == last_part(name):
            return Unit.BATCHES
    return None


def _loop_bounds(loop: Loop) -> tuple[cst.BaseExpression | None, ...]:
    """What bounds the batch loop's iterations: its ``range``, a stop on a counter it adds 1 to on
    every iteration, an outer ``while`` budget on such a counter."""
    return _range_bound(loop), _stop_bound(loop), _outer_while_bound(loop)


def _range_bound(loop: Loop) -> cst.BaseExpression | None:
    it = unwrap_iterable(loop.iter) if loop.iter is not None else None  # `tqdm(range(n))` runs n times too
    if isinstance(it, cst.Call) and last_part(func_name(it) or "") in ("range", "trange"):
        args = positional(it)
        return args[0] if len(args) == 1 else args[1] if len(args) >= 2 else None
    return _while_bound(loop.node) if isinstance(loop.node, cst.While) else None


def _stop_bound(loop: Loop) -> cst.BaseExpression | None:
    """``if global_step >= max_steps: break`` in the loop's own body, where the body adds 1 to
    ``global_step`` on every iteration and nothing else in the loop nest writes it: the loop stops
    after ``max_steps`` iterations over all epochs. So does ``global_step > max_steps``, and, the
    counter rising by 1 through every value, ``global_step == max_steps`` or ``== max_steps + 1``
    (a count from 1): one iteration more or less, the same unit."""
    node, outer = loop.node, loop.parent
    if not isinstance(node, (cst.For, cst.While)):
        return None
    for stmt in lines(node.body):
        if not (isinstance(stmt, cst.If) and stmt.orelse is None and _only_break(stmt.body)):
            continue
        for test in conjuncts(stmt.test):
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
                    isinstance(test.comparisons[0].operator, _STOPS):
                counter, bound = dotted(test.left), test.comparisons[0].comparator
                if isinstance(test.comparisons[0].operator, cst.Equal):
                    bound = _less_one(bound)
                nest = outer.node if outer is not None and outer.is_loop else node
                if counter is not None and counter not in names_in(bound) and \
                        _counted_every_iteration(node, counter) and len(_writes(nest, counter)) == 1:
                    return bound
    return None


_STOPS = (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)


def _less_one(bound: cst.BaseExpression) -> cst.BaseExpression:
    """``max_steps`` for ``max_steps + 1``, the bound as it is otherwise."""
    if isinstance(bound, cst.BinaryOperation) and isinstance(bound.operator, cst.Add) and int_value(bound.right) == 1:
        return bound.left
    return bound


def _only_break(body: cst.BaseSuite) -> bool:
    """A branch that leaves the loop: ``break``, or a ``return`` or ``sys.exit(0)`` after calls that
    only report or save (``print(f"done after {step} steps")``)."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not all(isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for stmt in statements):
        return False
    smalls = [small for stmt in statements for small in stmt.body]  # type: ignore[union-attr]
    if not smalls or not all(type(small) in (cst.Import, cst.ImportFrom) or type(small) is cst.Expr
                             and type(small.value) is cst.Call for small in smalls[:-1]):
        return False
    last = smalls[-1]
    return type(last) in (cst.Break, cst.Return) or type(last) is cst.Expr and type(last.value) is cst.Call \
        and func_name(last.value) in ("sys.exit", "exit", "quit")


def _writes(node: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    return [n for n in walk(node) if isinstance(n, (cst.AugAssign, cst.AssignTarget, cst.AnnAssign))
            and dotted(n.target) == name]


def _counted_every_iteration(node: cst.For | cst.While, counter: str) -> bool:
    """The loop body adds 1 to ``counter`` in a statement of its own top level, and writes it nowhere
    else in the loop."""
    writes = _writes(node.body, counter)
    increments = [small for small in small_statements(node.body) if isinstance(small, cst.AugAssign) and small in writes
                  and isinstance(small.operator, cst.AddAssign) and int_value(small.value) == 1]
    return len(writes) == 1 and len(increments) == 1


def _outer_while_bound(loop: Loop) -> cst.BaseExpression | None:
    """``while step < total_steps:`` around the batch loop, whose body adds 1 to ``step`` on every
    batch and nothing else in the nest writes it: the run ends after ``total_steps`` batches, however
    many passes over the data that takes."""
    outer = loop.parent
    if outer is None or not outer.is_loop or not isinstance(outer.node, cst.While) or \
            not isinstance(loop.node, (cst.For, cst.While)):
        return None
    test = outer.node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
            not isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual)):
        return None
    counter, bound = dotted(test.left), test.comparisons[0].comparator
    if counter is None or counter in names_in(bound):
        return None
    return bound if _counted_every_iteration(loop.node, counter) and len(_writes(outer.node, counter)) == 1 else None


def _while_bound(node: cst.While) -> cst.BaseExpression | None:
    """``while step < max_steps:`` whose body adds 1 to ``step`` on every iteration, and writes it
    nowhere else: the loop runs ``max_steps`` times (fewer when resumed, the schedule with it)."""
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
            not isinstance(test.comparisons[0].operator, cst.LessThan):
        return None
    counter, bound = dotted(test.left), test.comparisons[0].comparator
    if counter is None or counter in names_in(bound):
        return None
    return bound if _counted_every_iteration(node, counter) else None


def _under_flag(training: TrainingLoop, scheduler: Event, conds: tuple[Cond, ...]) -> bool:
    """A step under an ``if`` on a configuration flag (``if step_scheduler_batch:``, ``if False:``): it
    runs only in the configuration the flag names, which the file does not tie to the scheduler's kind.
    ``conds``: the step's conditions less the ``isinstance`` tests on the scheduler, which say its kind."""
    reader = training.reader if scheduler.loop is training.loop else training.parent_reader
    if reader is None or scheduler.loop not in (training.loop, training.loop.parent):
        return True
    return any(c.test is not None and c.branch != "after-exit"
               and reader.atom(c.test, c.negated, scheduler.order, 0).kind is GuardKind.INVARIANT
               for c in conds)


_ONE = {Unit.BATCHES: "batch", Unit.UPDATES: "optimizer step", Unit.EPOCHS: "epoch", None: "batch or optimizer step"}


def _stepping_units(training: TrainingLoop, model: FileModel) -> Iterator[tuple[Event, Unit | None]]:
    """Each scheduler step of the nest with the unit it advances in (None: a batch or an optimizer
    step, whichever Accelerate makes it where the file does not show whether it prepared it)."""
    if training.style is Style.ACCELERATE:
        # a scheduler handed to `accelerator.prepare` steps only when `accumulate()` lets the optimizer
        # step (accelerate's AcceleratedScheduler checks sync_gradients); an unprepared one every call
        for scheduler in training.events(Kind.SCHEDULER_STEP):
            if training.guard(scheduler).always:
                gated = scheduler_gated(model, scheduler.receiver)
                yield scheduler, None if gated is None else Unit.UPDATES if gated else Unit.BATCHES
        # stepped after the batch loop, outside accumulate(): once an epoch, prepared or not (the
        # last batch of an epoch syncs, so a prepared scheduler steps there too)
        yield from _epoch_steps(training)
        return
    if training.style is Style.UNKNOWN:
        # every backward and optimizer step under one condition (`if loss is not None:`): within it
        # the loop steps on every batch
        shared = _shared_condition(training) or 0
        for scheduler in training.events(Kind.SCHEDULER_STEP):
            if _branches(scheduler.conds[:shared]) == _branches(training.steps[0].conds[:shared]) and \
                    training.guard(scheduler, scheduler.conds[shared:]).always:
                yield scheduler, Unit.BATCHES
        return
    if training.style is Style.MICRO_LOOP:
        # micro-steps over the pieces of the batch the step loop takes (`for chunk in batch.split(n):`):
        # each of its batches is one optimizer step
        unit = Unit.BATCHES if _chunks_of_its_batch(training) else Unit.UPDATES
        for scheduler in training.step_loop.events(Kind.SCHEDULER_STEP):
            if training.guard(scheduler).always:
                yield scheduler, unit
        return
    for scheduler in training.events(Kind.SCHEDULER_STEP):
        guard = training.guard(scheduler)
        if guard.always or _until_break(scheduler):
            yield scheduler, Unit.BATCHES
        elif guard.periodic and training.style is Style.GUARDED:
            yield scheduler, Unit.UPDATES
    yield from _epoch_steps(training)


def _chunks_of_its_batch(training: TrainingLoop) -> bool:
    """The micro-step loop goes over pieces of the batch its step loop takes from a loader
    (``for batch in loader:``, ``clean_chunks = batch["target"].split(chunk_size)``, ``for chunk in
    zip(clean_chunks, ...):``): a batch of that loader is one optimizer step, not one micro-batch."""
    micro, outer = training.loop, training.step_loop
    if micro is outer or type(micro.node) is not cst.For or type(outer.node) is not cst.For \
            or not is_data_loop(outer) or is_data_loop(micro):
        return False
    batch = set(target_names(outer.node.target))
    names = {n.split(".")[0] for n in names_in(micro.node.iter)}
    for _ in range(4):  # follow the step loop's own bindings back to its batch, a few deep
        if names & batch:
            return True
        names = {n.split(".")[0] for a in outer.assignments if a.op == "=" and set(a.names) & names
                 for n in names_in(a.value)}
    return bool(names & batch)


def _epoch_steps(training: TrainingLoop) -> Iterator[tuple[Event, Unit | None]]:
    """The scheduler steps of the epoch loop around the batch loop, after it: once per epoch."""
    outer = training.loop.parent
    if outer is not None and outer.is_loop and is_data_loop(training.loop):
        for scheduler in outer.events(Kind.SCHEDULER_STEP):
            if scheduler.order > training.loop.order and (training.guard(scheduler).always
                                                          or _from_epoch_on(scheduler, outer)):
                yield scheduler, Unit.EPOCHS


def _branches(conds: tuple[Cond, ...]) -> list[tuple[int, str, bool]]:
    return [(id(c.owner), c.branch, c.negated) for c in conds]


def _shared_condition(training: TrainingLoop) -> int | None:
    """How many leading conditions every backward and every optimizer step of an unrecognised loop
    share (``if loss is not None:`` around backward, step and zeroing), where, past them, each step
    runs on every iteration: the loop steps on every batch it back-propagates. None otherwise."""
    if training.style is not Style.UNKNOWN or not training.steps or not training.backwards:
        return None
    events = [*training.backwards, *training.steps]
    if any(e.loop is not training.loop for e in events):
        return None
    shared = min(len(e.conds) for e in events)
    first = _branches(events[0].conds)
    while shared and any(_branches(e.conds)[:shared] != first[:shared] for e in events):
        shared -= 1
    if not shared or any(c.test is None for c in events[0].conds[:shared]):
        return None
    return shared if all(training.guard(s, s.conds[shared:]).always for s in training.steps) else None


def _never_accumulates(training: TrainingLoop, scheduler: Event, model: FileModel) -> bool:
    """No variant of the loop accumulates (``if N > 1: ... else:`` steps every batch only where N is 1),
    no condition around the steps names an accumulation count, and the loop back-propagates by plain
    ``backward()``: ``accelerator.backward`` under DeepSpeed (``accelerator.gradient_accumulation_steps``
    read from its config) steps the engine only every N micro-batches, whatever ``optimizer.step()`` says."""
    if any(t.accumulates for t in model.variants(training)) or \
            any(b.framework is not Framework.TORCH for b in training.backwards):
        return False
    return not any(c.test is not None and any(ACCUMULATION_NAME.search(n) for n in names_in(c.test))
                   for e in (scheduler, *training.steps) for c in e.conds)


def _divided_by_accumulation(horizon: cst.CSTNode, index: Index, depth: int = 0) -> cst.BaseExpression | None:
    """The accumulation count ``horizon`` is divided by (``len(loader) // args.gradient_accumulation_steps
    * epochs``), directly or in the one value the file assigns to a name in it; None where it is not, or
    where that count is 1 as the file ships it (a command-line default does not count)."""
    for node in walk(horizon):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            names = [n for n in names_in(node.right) if ACCUMULATION_NAME.search(last_part(n))]
            if len(names) == 1 and dotted(node.right) == names[0]:
                return None if numeric(node.right, index, defaults=False) == 1 else node.right
    if depth >= 2:
        return None
    for name in names_in(horizon):
        values = index.values.get(last_part(name), []) if "." not in name else []
        if len(values) == 1:
            found = _divided_by_accumulation(values[0], index, depth + 1)
            if found is not None:
                return found
    return None


def _until_break(scheduler: Event) -> bool:
    """Stepped after ``if iters == total_iters: break`` (and nothing else): on every batch until the
    loop stops. A ``continue`` or ``return`` before it could skip batches; a ``break`` only ends them."""
    return bool(scheduler.conds) and all(
        c.branch == "after-exit" and isinstance(c.owner, cst.If) and _only_break(c.owner.body)
        for c in scheduler.conds)


def _from_epoch_on(scheduler: Event, outer: Loop) -> bool:
    """Stepped on every epoch from some epoch on (``if epoch >= warmup_epochs: scheduler.step()``):
    still once per epoch, only later."""
    target = outer.target
    return bool(scheduler.conds) and isinstance(target, cst.Name) and all(
        c.branch == "body" and _counts_from(c.test, target.value) for c in scheduler.conds)


def _counts_from(test: cst.BaseExpression | None, counter: str) -> bool:
    """``counter >= start`` / ``counter > start`` (or ``start <= counter``), ``start`` free of ``counter``."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)):
        counted, start = test.left, right
    elif isinstance(op, (cst.LessThan, cst.LessThanEqual)):
        counted, start = right, test.left
    else:
        return False
    return isinstance(counted, cst.Name) and counted.value == counter and counter not in names_in(start)


def _shipped_without_accumulation(units: list[Unit | None], stepped: Unit | None, training: TrainingLoop,
                                  model: FileModel) -> bool:
    """Batches against optimizer steps, where every configuration the project ships sets the
    accumulation count to 1 (``latent.inert_count``): as shipped they are the same count."""
    return all({u, stepped} == {Unit.BATCHES, Unit.UPDATES} for u in units) and inert_count(model, training)


def _mismatch(horizon: Unit, stepped: Unit | None, accumulates: bool) -> bool:
    if stepped is None:
        return all(_mismatch(horizon, unit, accumulates) for unit in (Unit.BATCHES, Unit.UPDATES))
    if horizon is stepped:
        return False
    if not accumulates and {horizon, stepped} == {Unit.BATCHES, Unit.UPDATES}:
        return False  # without accumulation a batch is an update
    if horizon is Unit.UPDATES and stepped is Unit.BATCHES:
        return False  # per-micro-batch stepping: LC301's finding
    return True
