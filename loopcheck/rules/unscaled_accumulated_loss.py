"""## What it does
Checks that, under gradient accumulation, the loss handed to `backward()` is divided by the
number of accumulated micro-batches (or normalised by a window-wide count); also
`self.manual_backward(loss)` of a LightningModule that accumulates by hand under manual
optimization, which does not divide either. A loss summed over the micro-batch's samples
(`torch.sum(criterion(pred, y))` of a criterion built with `reduction="none"`, or one given
`reduction="sum"`) is left alone: the window's sum is the summed loss of a batch N times larger, which
is what a summed loss means.

## Why is this bad?
`backward()` sums gradients across the window. Without `loss / N` the optimizer step sees the
sum of N micro-batch gradients instead of their mean: every SGD update is N times too large, and
changing N silently changes the effective learning rate. `accelerator.backward(loss)` divides by
N itself, but only by the N given to `Accelerator(gradient_accumulation_steps=N)`: a loop that
accumulates by hand around it without that setting is flagged; and a loss the author scales explicitly (`* batch_size`, a token count) is left alone;
a manual fp16 loss scale (`loss * 2 ** lg_loss_scale`) is undone before the step and divides
nothing; a negated loss (PPO's `-torch.min(surr1, surr2).mean()`) keeps the scale of what it negates. Multiplying by the accumulation count instead of dividing (`loss * accum_iters`) is no
normalisation: the window sums N losses each N times too large, N^2 times the mean gradient.
Dividing by a running count (`k += 1; loss / k`) weighs the k-th micro-batch of a window
1/k: the first micro-batch counts as much as all the others together; where only the step's
micro-batch is back-propagated (LC113) and its loss is divided by the count of micro-batches since
the last step, each step takes 1/k of one micro-batch's gradient. A window closed by a count of
samples (`seen += x.shape[0]`; `if seen >= 128:` step and `seen = 0`) holds `ceil(128 / B)`
micro-batches: an undivided mean loss sums that many mean gradients. Inner loops that split or
replay the loader's own batch (chunks of one batch, GradCache-style re-forwarding), or run each network of a
list on it (FairNAS's `for _model in op_sampler(model): criterion(_model(input), target).backward()`,
an ensemble's members), are left alone:
whether their sum is right depends on the loss's reduction; except where the loop visibly goes over
slices of one batch (`for i in range(0, B, mb): micro = batch[i : i + mb]`, `torch.split(batch, mb)`,
guided-diffusion's `forward_backward`) and each slice's loss is visibly a mean (`(losses["loss"] *
weights).mean()`, no `reduction="sum"`) back-propagated undivided: the step then sums `ceil(B / mb)`
slice means where the batch mean was meant. That is reported only where the file shows the step itself
(`opt.step()`): behind a trainer's wrapper (guided-diffusion's `mp_trainer.optimize(opt)` of an AdamW,
nothing clipped) what the sum changes is unread, and an Adam-like step ignores the scale. Micro-steps that each take a new batch
from an iterator over the loader (`for i in range(len(loader) // N):` around `for _ in range(N):
x, y = next(loader_iter)`) are micro-batches of the loader, not pieces of one batch. Dividing the gradients instead of the
loss before the step (`for p in model.parameters(): p.grad /= N`) is the same normalisation, and so is
dividing a dict's item that is back-propagated where it is rebound (`losses["total"] = losses["total"] /
N`, then `backward(losses["total"])`).
A loop whose gradients are zeroed after it, before a backward of its own feeds the step (MAML's
per-task backward passes, then `optimiser.zero_grad(); meta_loss.backward(); optimiser.step()`), is
no window of that step.
apex's `with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()` is read as
the backward of `loss` (its scale is undone before the step, as a GradScaler's is). A component
weighted into a sum of losses (`loss_qa + opts.lw_st_ed * loss_st_ed`, `ce + 0.5 * aux`) is a loss
weight, not a scale of the whole loss: the sum is still undivided. A helper of the file that only
runs the model and hands back its outputs (`outputs = forward_step(cfg, model, batch)`, also beside
a piece of its input: `return outputs, question_ids`) normalises nothing, nor does arithmetic that
prepares its input before the model runs, dividing nothing and naming no accumulation count (ALPRO's
`repeat_counts = [e * cfg.num_labels for e in batch["n_examples_list"]]`); one with other arithmetic
in it may. A method of the loop's own class that runs `self.model` and a criterion the object holds
and returns that loss (`batch_loss = self._get_loss(x, target)`, with `out = self.model(x); loss =
self.criterion(out, target); return loss`) hands back one micro-batch's loss undivided; one with a
division, or naming the accumulation count, may normalise. A multiplication by the number of labels (`loss * cfg.num_labels`, `loss.mean() *
targets.size(1)`: a multi-label BCE's mean over labels undone) or by an objective's weight
(`lambda_coeff * loss`, bound to nothing that divides or names N) divides nothing by N either; a
factor bound to `1 / N` is the normalisation. A step function that back-propagates its parameter
(`def optimize(self, loss)`, called once per micro-batch) is read at the file's calls of it: every
caller must hand the loss undivided.
A backward skipped only for a NaN, infinite or exploding loss (`if torch.isfinite(loss):`, or a
helper of the file that returns such a test, `if is_valid_number(loss.item()):`) still runs on
every micro-batch that trains.
A loss not divided at all is not flagged where every optimizer the loop steps is built in the file
(directly, on `self`, through a name bound only to such classes: `optimizer_class = bnb.optim.AdamW8bit`
under a flag, by the `configure_optimizers` of a LightningModule that steps `opt = self.optimizers()` by
hand, or returned by a factory function of the file: `optimizer = build_optimizer(model,
cfg)` with `return torch.optim.AdamW(...)`) as Adam, AdamW, Adamax, NAdam, FusedAdam or Lion (also
bitsandbytes' `AdamW8bit`, paged and Lion variants, `AdamAtan2`, `AdoptAtan2`, `StableAdamW`, icefall's `ScaledAdam`;
and Adafactor, torch's or transformers', whose decay is always decoupled) with no coupled
`weight_decay`: their update divides the gradient's running mean by the root of its running square (or
takes its sign, or an atan2 of the two), so N times the gradient gives the same step up to `eps`. On CPU, a small MLP
trained 12 windows of 4 micro-batches with the loss undivided and divided ends with parameters at most
1.2e-05 apart under Adam, AdamW, NAdam and Adamax, exactly equal under Adam with `eps=0`, and 0.06 apart
under SGD (benchmarks/results/adam-s21/scale_invariance.py); exactly equal under Adafactor, torch's and
transformers' (fixed or relative step, with momentum or decay; benchmarks/results/adafactor-s30). RAdam is not among them: its first steps,
before the variance's rectification term is defined, are momentum SGD, N times too large (0.03 apart).
A clip does not change that: its threshold meets the N-fold sum, so it clips as if set N times lower,
and the run is the divided run with that lower clip setting (a small causal transformer, Adam, N = 4,
300 steps, 3 seeds: undivided under `max_norm=1.0` clips on 90-95% of steps where the divided run never
clips, and ends at the divided run's held-out loss under `max_norm=0.25` to the fourth decimal, 0.01
and 0.06 below the divided `max_norm=1.0` run at lr 1e-3 and 3e-4; benchmarks/results/adam-s22/
clip_effect.py): a different clip setting, not a wrong step; outside reviews judged such findings
debatable.
Where the optimizer's weight decay is coupled (Adam's own `weight_decay`, in the call or in a parameter
group, added to the gradient before the ratio; 0.09 apart at `weight_decay=0.05`), it is flagged: the
decay weighs N times less against the sum (the message also names a clip where the file has one). An
optimizer chosen by a configuration's name or built by a function this file does not show is read as
unknown: the message names both the SGD and the Adam effect. One handed in by the caller of the loop's
function (`def train_loop(model, loader, optimizer, ...)`, which the file neither binds nor passes, in a
module another file of the project imports) is flagged only where the loop clips (the threshold meets
the N-fold sum whatever the optimizer): without a clip the N-fold step is certain only for an SGD-like
optimizer, which the file does not show (outside reviews judged such findings false under the AdamW
their callers build). So is one that no file of the project constructs (a framework's `self.optimizer`)
where every optimizer class the project's Python files name in a string is an Adam-like one with
decoupled decay (argus's `'optimizer': ('AdamW', {...})` in the entry script's parameters): flagged only
where the loop clips. Every construction of the optimizer counts: where another branch builds one this
file cannot read (`optimizer = BertAdam(params, ...)` beside `FusedAdam` under `if args.fp16:`;
BertAdam clips each gradient inside its step), the loss is flagged; a call handed the optimizer
(`FP16_Optimizer(optimizer)`) only wraps it. A running count is always flagged: it
weighs the micro-batches unequally, which no optimizer undoes. Nor is a raw loss flagged where every
optimizer the loop steps gets a learning rate divided by N (Darknet's `base_lr = LR / batch_size /
subdivision` for losses summed over the batch, also `lr=learning_rate / config.batch` where the loader's
batch size is `config.batch // config.subdivisions`): `lr / N` times the window's sum is `lr` times its mean.
Nor where the file scales its learning rate by the micro-batch size and leaves N out of it
(Detectron.pytorch's `cfg.SOLVER.BASE_LR *= args.batch_size / original_batch_size`, "gradients are
accumulated, so lr is scaled based on batch_size instead of effective_batch_size"): the window's sum
times that rate is the linear-scaling rule for the effective batch (LC304 is then silent too).
The loss handed to its own `backward()` as the gradient (`loss.backward(loss / N)`) divides nothing:
autograd multiplies each micro-batch's gradients by that value, so the step follows the gradient of the
squared loss, `loss ** 2 / (2 * N)` (checked on CPU), weighing each micro-batch by its own loss; that
is reported whatever the optimizer, since no optimizer undoes weights that differ between micro-batches.
A loss divided by N twice is flagged too: `loss = loss / N` followed by `(loss / N).backward()`, or
`loss / N` handed to `accelerator.backward` inside `accumulate()` of an
`Accelerator(gradient_accumulation_steps=N)`, which divides by N again: every step is N times too
small (not where every optimizer stepped is Adam-like with no coupled decay, as above: a gradient N
times too small is the same step to it, up to `eps`). Only divisions that run whenever the backward does are counted (`if not use_accelerate: loss =
loss / N` is not).

## Fix
Divide where the loss is back-propagated: `(loss / accum_steps).backward()` or
`scaler.scale(loss / accum_steps).backward()`, so values logged from `loss` keep their meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Fix, called_once, replace
from loopcheck.model import Event, FileModel, Framework, Phase, Role, Style, TrainingLoop
from loopcheck.model.accelerate import accelerator_calls, accumulation_setting
from loopcheck.model.events import Kind
from loopcheck.model.divided_twice import divisions
from loopcheck.model.loss import Scaling, loss_scaling
from loopcheck.model.roles import role_of_constructor
from loopcheck.model.syntax import (calls, dotted, func_name, int_value, is_zero, keyword, last_part, method,
                                    names_in, param_names, positional, same, source, walk)
from loopcheck.model.training import (draws_batches, is_data_loop, is_fabric_backward, is_manual_backward,
                                      one_micro_batch_loss, over_modules, slices_of_a_batch)
from loopcheck.model.values import BATCH_SIZE_NAME, LR_NAME, accumulation_gates_nothing
from loopcheck.rules._base import Rule, Violation


class UnscaledAccumulatedLoss(Rule):
    code = "LC102"
    message = "the accumulated loss is not divided by the number of micro-batches: every step is N times too large"
    fixable = True

    VALID = [
        """
MAX_GPU_BATCH_SIZE = 16
config = {"lr": 2e-5, "batch_size": 16}
batch_size = int(config["batch_size"])
gradient_accumulation_steps = 1
if batch_size > MAX_GPU_BATCH_SIZE:
    gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    if (step + 1) % gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.mul_(x.size(0) / batch_size)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss = loss / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for step in range(max_steps):
    for micro in range(grad_accum):
        logits, loss = model(*get_batch())
        loss /= grad_accum
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
""",
        """
for i, batch in enumerate(loader):
    loss = loss_fn(model(batch["x"]), batch["y"], reduction="sum") / num_items_in_window
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
while True:
    optimizer.zero_grad(set_to_none=True)
    for round_idx in range(num_accumulation_rounds):
        images, labels = next(dataset_iterator)
        loss = loss_fn(net=ddp, images=images, labels=labels)
        loss.sum().mul(loss_scaling / batch_gpu_total).backward()
    optimizer.step()
""",
        """
for batch in batch_loader:
    optimizer.zero_grad()
    for chunk in batch_chunks(batch, mini_batch_chunk_size):
        loss, count = model.forward_loss(chunk)  # summed over the chunk's samples
        loss.backward()
    optimizer.step()
""",
        """
for step in range(num_iterations):
    for i in range(train_accumulation_steps):
        loss = model(*next(batches))
        loss.backward()
    for p in model.parameters():
        p.grad /= train_accumulation_steps
    optimizer.step()
    model.zero_grad(set_to_none=True)
""",
    ]
    INVALID = [
        """
model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    with amp.scale_loss(loss, optimizer, delay_unscale=(step + 1) % accum_steps != 0) as scaled_loss:
        scaled_loss.backward()  # LC102
    if (step + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for step in range(total_steps):
    for micro in range(grad_accum):
        x, y = next(batches)
        loss = criterion(model(x), y)
        (loss * 2 ** lg_loss_scale).backward()  # LC102
    optimizer.step()
    optimizer.zero_grad()
""",
        """
micro = 0
for i, (x, y) in enumerate(loader):
    micro += 1
    loss = criterion(model(x), y) / micro
    loss.backward()  # LC102
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
        micro = 0
""",
        """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()  # LC102
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
for step in range(max_steps):
    for micro in range(grad_accum):
        outputs = model(**next(batches))
        scaler.scale(outputs.loss).backward()  # LC102
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
""",
        """
accelerator = Accelerator()
model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
for step, batch in enumerate(train_dataloader):
    loss = model(**batch).loss
    accelerator.backward(loss)  # LC102
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        helpers = model.index.functions
        in_place = not model.index.attributes.isdisjoint(_IN_PLACE)  # a file with no such call has no walk to do
        for training in model.training_loops:
            yield from self._divided_twice(model, training)
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP):
                continue
            # slices of one batch (`for i in range(0, B, mb): micro = batch[i : i + mb]`, `torch.split(batch, mb)`)
            slices = slices_of_a_batch(training.loop) if training.style is Style.MICRO_LOOP else None
            if training.style is Style.MICRO_LOOP and is_data_loop(training.step_loop) \
                    and not draws_batches(training.loop) and slices is None:
                # the micro-steps split or replay the loader's batch (flair's chunks of one batch with
                # summed losses, open_clip's GradCache): whether the sum is right depends on the loss
                continue
            if training.style is Style.MICRO_LOOP and over_modules(training.loop):
                continue  # each network of a list on the same batch: a sum of losses, not of micro-batches
            if accumulation_gates_nothing(training, model.index):
                continue
            if _grads_divided(model, training):
                continue  # `for p in model.parameters(): p.grad /= N` after the window normalises instead
            # a step under two periodic tests: what the loss should be divided by is unclear
            window_unknown = training.step_guard is not None and training.step_guard.window_unknown
            n = training.modulus
            accumulation_names = {name.rsplit(".", 1)[-1] for name in names_in(n)} if n is not None else set()
            for backward in training.backwards:
                if backward.framework not in (Framework.TORCH, Framework.LOSS_SCALER, Framework.ACCELERATE) \
                        and not is_manual_backward(backward) and not is_fabric_backward(backward) \
                        or backward.loss is None:
                    continue
                if backward.framework is Framework.ACCELERATE and (
                        accumulation_setting(model) is not None or not accelerator_calls(model)):
                    # accelerator.backward divides by the configured N, accumulate() or not; an
                    # Accelerator built in another module may be configured with that N
                    continue
                if not training.every_iteration(backward):
                    if training.guard(backward).periodic and one_micro_batch_loss(training, backward) and loss_scaling(
                            backward.loss, backward.loop, backward.order, helpers, accumulation_names,
                            module=model.module) is Scaling.RUNNING:
                        # one micro-batch's loss, back-propagated on the step only (LC113), divided by a count
                        # of the micro-batches since the last step: each step weighs one batch by 1/k
                        yield self.at(backward, "the loss back-propagated on the step is one micro-batch's, divided by "
                                                "a running count of the micro-batches since the last step: each step "
                                                "takes 1/k of one micro-batch's gradient, k varying from step to step")
                    continue
                if window_unknown:
                    continue
                weight = _loss_as_gradient(backward)
                if weight is not None:
                    yield self.at(backward, f"`{source(weight)}` is handed to `backward()` as the loss's gradient, "
                                            "not divided into the loss: each micro-batch's gradients are multiplied by "
                                            "its own loss value, so the step follows the gradient of the squared loss "
                                            "(harder micro-batches weigh more, whatever the optimizer); write "
                                            f"`({source(weight)}).backward()`")
                    continue
                if in_place and _scaled_in_place(backward, backward.origin or training.loop.function
                                                 or training.loop.node):
                    continue
                if type(backward.loss) is cst.Subscript and _item_divided(
                        backward.loss, backward.origin or training.loop.function or training.loop.node):
                    continue
                scaling = loss_scaling(backward.loss, backward.loop, backward.order, helpers,  # type: ignore[arg-type]
                                       accumulation_names, through_forward_helpers=True, module=model.module)
                if scaling is Scaling.UNKNOWN and not training.loop.is_loop:
                    scaling = _scaling_at_calls(model, training, backward, accumulation_names)
                count = f"`{source(n)}`" if n is not None else "N"
                if slices is not None and n is None:
                    # a sum of per-slice means is the batch mean only if each slice weighs its share
                    # only where the file shows the step itself (`opt.step()`): behind a trainer's wrapper
                    # (guided-diffusion's `mp_trainer.optimize(opt)` of an AdamW, no clipping) what the sum
                    # changes is unread, and an Adam-like step ignores it
                    direct = all(_direct_step(step.node) for step in training.steps)
                    effect = _effect(model, training, f"`{slices}`") \
                        if direct and scaling is Scaling.RAW and _slice_mean(backward) else None
                    if effect is not None:
                        yield self.at(backward, "the mean loss of each slice of the batch is back-propagated "
                                                "undivided, so the step sums the slices' mean gradients: "
                                                f"{effect}; scale each slice's loss by its share of the batch")
                    continue
                if scaling is Scaling.RUNNING:
                    yield self.at(backward, "the loss is divided by a running count of micro-batches, so the k-th "
                                            "micro-batch of a window weighs 1/k: divide every micro-batch by the "
                                            f"same {count}")
                elif scaling is Scaling.TIMES_COUNT:
                    # `loss * N` on every micro-batch: the window sums N losses each N times too large
                    effect = _effect(model, training, f"{count}^2")
                    if effect is not None:
                        yield self.at(backward, f"the loss is multiplied by {count} instead of divided by it: "
                                                f"{effect}")
                elif scaling is Scaling.RAW and not _lr_divided(model, training, accumulation_names) \
                        and not _lr_scaled_by_micro_batch(model, accumulation_names) \
                        and not _summed_over_samples(model, backward):
                    # a window one micro-batch longer than N (LC106) sums N + 1 losses, and dividing by N
                    # does not mend it
                    late = training.step_guard is not None and training.step_guard.phase is Phase.LATE
                    effect = _effect(model, training, f"({count} + 1)" if late else count)
                    if effect is None:
                        continue
                    fix = _divide_at_backward(model, training, backward, n) if n is not None and not late else None
                    yield self.at(backward, f"the loss is back-propagated on every micro-batch without being divided "
                                            f"by {count}: {effect}", fix)

    def _divided_twice(self, model: FileModel, training: TrainingLoop) -> Iterator[Violation]:
        """A loss divided by the accumulation count twice on its way to ``backward``: by hand twice, or
        by hand and again by ``accelerator.backward`` inside ``accumulate()`` of an Accelerator configured
        with that count (it divides by ``gradient_accumulation_steps`` itself). Not where every optimizer
        stepped is Adam-like with no coupled decay: its step ignores a uniform scale of the gradient."""
        if training.backwards and _adam_like(model, training) is False:
            return
        setting = accumulation_setting(model) if training.style is Style.ACCELERATE else None
        configured = dotted(setting[0].value) if setting is not None and setting[0].keyword is not None else None
        n = training.modulus if training.style in (Style.GUARDED, Style.MICRO_LOOP) else None
        for backward in training.backwards:
            if backward.loss is None or not training.every_iteration(backward):
                continue
            if configured is not None and backward.framework is Framework.ACCELERATE \
                    and backward.in_context("accumulate") and len(accelerator_calls(model)) == 1:
                found = divisions(backward.loss, backward.loop, backward.order, backward.conds, {last_part(configured)})
                if found and setting is not None:
                    yield self.at(backward, f"the loss is divided by `{configured}` and then back-propagated with "
                                            f"`accelerator.backward`, which divides it by `{setting[1]}` again: "
                                            "divided twice, every step is N times too small; drop the manual division")
            elif n is not None and backward.framework is Framework.TORCH and dotted(n) is not None:
                found = divisions(backward.loss, backward.loop, backward.order, backward.conds,
                                  {last_part(dotted(n))})  # type: ignore[arg-type]
                if found is not None and found >= 2:
                    yield self.at(backward, f"the loss is divided by `{source(n)}` twice before it is back-propagated: "
                                            "divided twice, every step is N times too small; divide once")


def _loss_as_gradient(backward: Event) -> cst.BaseExpression | None:
    """The argument of ``loss.backward(loss / N)`` (positional or ``gradient=``) where it reads the loss
    itself: autograd multiplies the gradients by it, so each micro-batch weighs by its own loss value
    (the gradient of ``loss ** 2 / (2 * N)``), which is not a division of the loss by N."""
    call = backward.node
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute) \
            or call.func.attr.value != "backward" or not isinstance(backward.loss, cst.Name) \
            or dotted(call.func.value) != backward.loss.value:
        return None  # `accelerator.backward(loss)` hands the loss itself
    given = keyword(call, "gradient") or next((a.value for a in call.args if a.keyword is None), None)
    if given is None or any(isinstance(n, cst.Call) for n in walk(given)):
        return None  # `torch.ones_like(loss)`: a gradient of ones, built from the loss's shape
    return given if backward.loss.value in names_in(given) else None


def _scaling_at_calls(model: FileModel, training: TrainingLoop, backward: Event,
                      accumulation_names: set[str]) -> Scaling:
    """A step function back-propagating its parameter (``def optimize(self, loss): ...
    scaled_loss.backward()``, called once per micro-batch by ``mt_step``, ``clm_step``, ...): the
    loss as every call of the file hands it. Each call must sit in a function with no loop of its
    own (the loss read there is that call's), and every one must agree."""
    fn = training.loop.function
    loss = backward.loss
    if fn is None or not isinstance(loss, cst.Name) or backward.origin is not fn \
            or len(model.index.functions.get(fn.name.value, [])) != 1 \
            or backward.loop.assignments_before(loss.value, backward.order):
        return Scaling.UNKNOWN
    params = [p.name.value for p in fn.params.params]
    method_call = bool(params) and params[0] in ("self", "cls")
    if loss.value not in params:
        return Scaling.UNKNOWN
    position = params.index(loss.value) - method_call
    from loopcheck.model.builder import Builder  # only for this rare shape: the callers' scopes
    builder = Builder(model.module, model.index, model.project)
    found: set[Scaling] = set()
    for callers in model.index.functions.values():
        for caller in callers:
            if caller is fn:
                continue
            sites = [c for c in walk(caller.body) if isinstance(c, cst.Call) and _calls(c, fn, method_call)]
            if not sites:
                continue
            if caller in model.index.with_loops:
                return Scaling.UNKNOWN  # called from a loop: read there, not here
            scope = builder.scope(caller)
            nodes = {id(n): i for i, n in enumerate(walk(caller.body))}
            for site in sites:
                given = keyword(site, loss.value) or (
                    site.args[position].value if position < len(site.args) and site.args[position].keyword is None
                    and not site.args[position].star else None)
                if given is None:
                    return Scaling.UNKNOWN
                after = [a.order for a in scope.assignments if nodes.get(id(a.node), -1) > nodes[id(site)]]
                order = min(after, default=builder.order + 1)
                found.add(loss_scaling(given, scope, order, model.index.functions, accumulation_names,
                                       through_forward_helpers=True))
    return found.pop() if len(found) == 1 else Scaling.UNKNOWN


def _summed_over_samples(model: FileModel, backward: Event) -> bool:
    """The loss is a sum over the micro-batch's samples: ``torch.sum(loss_function(pred, y))`` (or
    ``.sum()``) of a criterion built with ``reduction="none"`` or given ``reduction="sum"``. The window's
    undivided sum is then the summed loss of a batch N times larger, which is what a summed loss means."""
    value, order = _last_value(backward.loss, backward, backward.order)
    if type(value) is cst.Call and func_name(value) == "torch.sum" and len(value.args) == 1:
        value, order = _last_value(value.args[0].value, backward, order)
    elif type(value) is cst.Call and not value.args and (method(value) or (None, ""))[1] == "sum":
        value, order = _last_value(value.func.value, backward, order)  # type: ignore[attr-defined]
    elif not (type(value) is cst.Call and _reduction(value) == "sum"):
        return False
    if type(value) is not cst.Call:
        return False
    built = model.roles.constructed.get(value.func.value, []) if type(value.func) is cst.Name else []
    return _reduction(value) in ("sum", "none") or len(built) == 1 and _reduction(built[0]) in ("sum", "none")


def _last_value(expr: cst.BaseExpression | None, backward: Event,
                order: int) -> tuple[cst.BaseExpression | None, int]:
    """``expr``, or what the iteration last bound its name to before ``order`` (and when)."""
    name = dotted(expr) if expr is not None else None
    if name is None:
        return expr, order
    bound = backward.loop.assignments_before(name, order)
    return (bound[-1].value, bound[-1].order) if bound and bound[-1].op == "=" else (None, order)


def _reduction(call: cst.Call) -> str | None:
    given = keyword(call, "reduction")
    return given.value[1:-1] if type(given) is cst.SimpleString else None


def _slice_mean(backward: Event) -> bool:
    """The loss back-propagated for a slice is visibly a mean over that slice: ``(losses["loss"] *
    weights).mean()``, ``torch.mean(...)`` (a sum, ``reduction="sum"``, adds up to the batch's own sum)."""
    loss = backward.loss
    name = dotted(loss) if loss is not None else None
    if name is not None:
        assigned = [a for a in backward.loop.assignments_before(name, backward.order) if a.op != "for"]
        loss = assigned[-1].value if assigned and assigned[-1].op == "=" else None
    if not isinstance(loss, cst.Call):
        return False
    # a per-sample loss summed anywhere on the way (`F.mse_loss(..., reduction="sum")`, then `.mean()`)
    values = [loss, *(a.value for a in backward.loop.assignments if a.order < backward.order and a.op == "=")]
    if any(isinstance(n, cst.Call) and (keyword(n, "reduction") is not None and "sum" in source(keyword(n, "reduction"))
                                        or (method(n) or (None, ""))[1] == "sum") for v in values for n in walk(v)):
        return False
    called = method(loss)
    return called is not None and called[1] == "mean" and not loss.args \
        or func_name(loss) == "torch.mean"


def _calls(call: cst.Call, fn: cst.FunctionDef, method_call: bool) -> bool:
    """``self.optimize(...)`` for a method, ``optimize(...)`` for a function."""
    if method_call:
        return isinstance(call.func, cst.Attribute) and call.func.attr.value == fn.name.value \
            and isinstance(call.func.value, cst.Name) and call.func.value.value in ("self", "cls")
    return isinstance(call.func, cst.Name) and call.func.value == fn.name.value


def _grads_divided(model: FileModel, training: TrainingLoop) -> bool:
    """The gradients themselves are scaled before the step: ``p.grad /= N``, ``p.grad.div_(N)``,
    ``p.grad *= 1 / N``, ``p.grad.mul_(1 / N)``."""
    for loop in {id(training.loop): training.loop, id(training.step_loop): training.step_loop}.values():
        for assignment in loop.assignments:
            if any(n.endswith(".grad") for n in assignment.names) and assignment.op in ("DivideAssign",
                                                                                      "MultiplyAssign"):
                return True
    for call in model.index.calls:
        called = method(call)
        if called is not None and called[1] in ("div_", "mul_") and (dotted(called[0]) or "").endswith(".grad"):
            return True
    return False


_IN_PLACE = frozenset({"div_", "true_divide_", "mul_"})


def _scaled_in_place(backward: Event, scope: cst.CSTNode) -> bool:
    """``loss.mul_(microbatch_size / batch_size)`` or ``loss.div_(N)`` where the loss is back-propagated
    (composer): the loss is normalised in place, not passed on raw."""
    name = dotted(backward.loss) if backward.loss is not None else None
    if name is None:
        return False
    for node in calls(scope):
        called = method(node) if node.args else None
        if called is None or dotted(called[0]) != name:
            continue
        if called[1] in ("div_", "true_divide_") or called[1] == "mul_" and any(
                isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Divide)
                for n in walk(node.args[0].value)):
            return True
    return False


def _item_divided(item: cst.Subscript, scope: cst.CSTNode) -> bool:
    """``losses["total_loss"] = losses["total_loss"] / self.grad_accumulate`` where that item is
    back-propagated (HeltonPretrain's trainer): the item is normalised where it is rebound, which no
    name's binding records."""
    def spelled(expr: cst.BaseExpression) -> str:
        return source(expr).replace("'", '"')  # (`losses['total']` is `losses["total"]`)

    key = spelled(item)
    return any(type(node) is cst.Assign and len(node.targets) == 1 and spelled(node.targets[0].target) == key
               and isinstance(value := node.value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide)
               and spelled(value.left) == key for node in walk(scope))


_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)


# Optimizers whose update is m / (sqrt(v) + eps) (or its sign, for Lion): a constant factor on
# every gradient cancels. Their weight decay is decoupled unless said (Adam's own `weight_decay`
# adds `wd * param` to the gradient before the ratio; FusedAdam decouples unless `adam_w_mode=False`).
# bitsandbytes' 8-bit and paged variants keep the same update on quantised states; the atan2 variants
# (`AdamAtan2`, `AdoptAtan2`) take atan2(m, sqrt(v)), with no epsilon at all; StableAdamW (Wortsman's
# unfused reference, as zeta ships it) is AdamW whose step is scaled down by the RMS of g / sqrt(v); Adafactor divides
# by the root of a factored running square and clips the update by its own RMS. Those whose decay this
# file cannot tell coupled or not are read as coupled: where one is set, the finding stays. Not RAdam:
# its first steps (until the variance's rectification term is defined) are momentum SGD, N-fold.
_SCALE_FREE = {"Adam", "AdamW", "Adamax", "NAdam", "FusedAdam", "Lion", "Adam8bit", "AdamW8bit",
               "Adam32bit", "AdamW32bit", "PagedAdam", "PagedAdamW", "PagedAdam8bit", "PagedAdamW8bit",
               "PagedAdam32bit", "PagedAdamW32bit", "Lion8bit", "Lion32bit", "PagedLion", "PagedLion8bit",
               "PagedLion32bit", "AdamAtan2", "AdoptAtan2", "StableAdamW", "StableAdamWUnfused", "ScaledAdam",
               "Adafactor"}
_DECOUPLED = {"AdamW", "FusedAdam", "Lion", "AdamW8bit", "AdamW32bit", "PagedAdamW", "PagedAdamW8bit",
              "PagedAdamW32bit", "Lion8bit", "Lion32bit", "PagedLion", "PagedLion8bit", "PagedLion32bit",
              "StableAdamW", "StableAdamWUnfused", "ScaledAdam", "Adafactor"}


def _effect(model: FileModel, training: TrainingLoop, count: str) -> str | None:
    """What the N-fold gradient changes; None where nothing that matters does (an Adam-like optimizer
    with no coupled weight decay, clipped or not)."""
    adam = _adam_like(model, training)
    named = _adam_named(model, training) if adam is None else None
    if named is not None:
        # `BertAdam(...)` in the other branch: an Adam whose clipping and decay this file cannot read
        bert = " (`BertAdam` clips each gradient to norm 1.0 by default)" if "BertAdam" in named else ""
        return (f"an Adam-like optimizer keeps its step size, but any clip threshold or coupled weight decay "
                f"it applies{bert} meets a {count}-fold sum")
    if adam is None:
        if _sgd_only(model, training):
            return f"each optimizer step is {count} times too large"
        # an optimizer this file does not build or read: the step grows N-fold only if it scales with the
        # gradient, which an Adam-like one does not; a clip threshold meets the N-fold sum whatever it is
        if (_handed_in(model, training) or _named_decoupled(model, training)) and not _clips(model, training):
            return None
        return (f"each optimizer step sees {count} times the window's mean gradient: an SGD step is {count} times too "
                f"large (an Adam-like optimizer keeps its step size, but a clip threshold or coupled weight decay "
                f"meets the {count}-fold sum)")
    if not adam:
        # no coupled decay: a clip alone only moves its threshold (as if set N times lower), which
        # trains like another clip setting, not like a wrong step
        return None
    changes = [f"its coupled `weight_decay` weighs {count} times less against the gradient"]
    if _clips(model, training):
        changes.append(f"the clip threshold meets the sum of {count} micro-batch gradients, so it clips as if set "
                       f"{count} times lower")
    return f"the step size of an Adam-like optimizer does not change, but {' and '.join(changes)}"


def _handed_in(model: FileModel, training: TrainingLoop) -> bool:
    """Every optimizer the loop steps is a parameter of the function holding the loop, bound nowhere
    in the file and passed by no call of it (``def train_loop(model, loader, optimizer, ...)``), in a
    module another file of the project imports: its caller there builds it."""
    function = training.loop.function
    if function is None or model.project is None:
        return False  # (a file checked alone, outside any project: no caller to build the optimizer)
    params = param_names(function.params)
    return bool(training.steps) and all(
        (name := step.receiver) is not None and name in params and not model.index.values.get(name)
        and name not in model.roles.constructed and f"{function.name.value}({name})" not in model.index.arguments
        for step in training.steps) and model.project.imported_elsewhere()


def _named_decoupled(model: FileModel, training: TrainingLoop) -> bool:
    """No construction of the optimizers the loop steps is in this file (a framework builds
    ``self.optimizer`` from parameters), and every optimizer class the project's Python files name in a
    string is an Adam-like one with decoupled decay (argus's ``'optimizer': ('AdamW', {...})``)."""
    if model.project is None or _built_here(model, {step.receiver for step in training.steps}) is not None:
        return False
    named = model.project.named_strings(frozenset(_SCALE_FREE | _OTHER_OPTIMIZERS))
    return bool(named) and named <= _DECOUPLED


def _sgd_only(model: FileModel, training: TrainingLoop) -> bool:
    """Every optimizer the loop steps is built in this file as ``SGD``, whose step is the gradient
    times the learning rate (with momentum, a sum of such): an N-fold gradient is an N-fold step."""
    if not all(_direct_step(step.node) for step in training.steps):
        return False
    calls = _through_factories(model, _built_here(model, {step.receiver for step in training.steps}))
    return bool(calls) and all(last_part(func_name(call) or "") == "SGD" for call in calls)


def _adam_named(model: FileModel, training: TrainingLoop) -> set[str] | None:
    """The names of the calls building the optimizers the loop steps, where every one is named like an
    Adam (``BertAdam``, ``FusedAdam``) or wraps one (``FP16_Optimizer(optimizer)``) and one is an Adam
    whose arguments this file does not read (``BertAdam``); None otherwise."""
    if not all(_direct_step(step.node) for step in training.steps):
        return None
    names: set[str] = set()
    for step in training.steps:
        short = last_part(step.receiver or "")
        calls = model.roles.constructed.get(short, [])
        built = [last_part(func_name(c) or "") for c in calls
                 if not any(short in {last_part(n) for n in names_in(a.value)} for a in c.args)]
        # not RAdam: its first steps are momentum SGD, N-fold under an N-fold gradient
        if not built or not all(re.search(r"(?<!R)Adam(W|ax)?$", n) for n in built):
            return None
        names.update(built)
    # Adam classes this file reads are judged by their arguments (`_adam_like`); this is for the others
    return names if names - _SCALE_FREE else None


def _adam_like(model: FileModel, training: TrainingLoop) -> bool | None:
    """Whether every optimizer the loop steps is built in this file as an Adam-like optimizer, whose
    step ignores the gradient's scale: None if not; else whether one of them has a coupled weight
    decay (added to the gradient before the ratio, so it weighs N times less against an N-fold sum)."""
    if not all(_direct_step(step.node) for step in training.steps):
        return None  # a wrapper's step (`trainer.optimize(opt)`) may clip or rescale where this file cannot see
    calls = _through_factories(model, _built_here(model, {step.receiver for step in training.steps}))
    if calls is None:
        return None
    coupled_decay = False
    for call in calls:
        kinds = _classes_called(model, call)
        if kinds - _SCALE_FREE or sum(a.keyword is None for a in call.args) > 2:
            return None  # beyond (params, lr) a positional argument may be the weight decay
        decay = keyword(call, "weight_decay")
        mode = keyword(call, "adam_w_mode")
        coupled = bool(kinds - _DECOUPLED) or "FusedAdam" in kinds and mode is not None and not (
            isinstance(mode, cst.Name) and mode.value == "True")
        coupled_decay |= coupled and (decay is not None and not is_zero(decay) or _group_decay(model, call))
    return coupled_decay


def _configured_optimizers(model: FileModel, name: str) -> list[cst.Call]:
    """``opt = self.optimizers()`` in a LightningModule under manual optimization: the optimizers its
    ``configure_optimizers`` of this file builds, where every call there that builds one names a known
    optimizer class (none where one is another: its scale may matter)."""
    bound = model.index.values.get(name, [])
    if len(bound) != 1 or type(bound[0]) is not cst.Call or dotted(bound[0].func) != "self.optimizers":
        return []
    methods = model.index.functions.get("configure_optimizers", [])
    if len(methods) != 1:
        return []
    known = _SCALE_FREE | _OTHER_OPTIMIZERS
    built = [n for n in walk(methods[0]) if type(n) is cst.Call and (
        last_part(func_name(n) or "") in known or role_of_constructor(func_name(n) or "") is Role.OPTIMIZER)]
    return built if all(last_part(func_name(n) or "") in known for n in built) else []


def _bound_to_optimizer_classes(model: FileModel, call: cst.Call) -> bool:
    kinds = _classes_called(model, call)
    return type(call.func) is cst.Name and kinds != {call.func.value} and not kinds - _SCALE_FREE - _OTHER_OPTIMIZERS


_OTHER_OPTIMIZERS = {"SGD", "RAdam", "RMSprop", "Adagrad", "Adadelta", "ASGD", "Rprop", "LBFGS", "SparseAdam"}


def _classes_called(model: FileModel, call: cst.Call) -> set[str]:
    """The optimizer classes a construction may build: its callee's name, or, where the callee is a
    name the file binds only to classes (``optimizer_class = bnb.optim.AdamW8bit`` under a flag,
    ``torch.optim.AdamW`` otherwise), each of those classes."""
    name = func_name(call) or ""
    bound = model.index.values.get(name, []) if type(call.func) is cst.Name else []
    if bound and all(type(v) in (cst.Name, cst.Attribute) and dotted(v) is not None for v in bound):
        return {last_part(dotted(v) or "") for v in bound}
    return {last_part(name)}


def _group_decay(model: FileModel, call: cst.Call) -> bool:
    """A parameter group of the call sets a weight decay (``Adam([{"params": w, "weight_decay": 1e-4},
    ...])``), in the call or in the one value the file binds to the name it is handed
    (``Adam(groups, lr=lr)``)."""
    values: list[cst.CSTNode] = [a.value for a in call.args]
    for arg in call.args:
        name = dotted(arg.value)
        if name is not None:
            values += model.index.values.get(last_part(name), [])
    return any(isinstance(n, cst.DictElement) and isinstance(n.key, cst.SimpleString)
               and n.key.evaluated_value == "weight_decay" and not is_zero(n.value)
               for v in values for n in walk(v))


def _clips(model: FileModel, training: TrainingLoop) -> bool:
    """The file clips gradients: a call naming ``clip_grad`` (torch's, timm's, accelerate's, Lightning's,
    a helper of the file it does not follow), or a clipping the loop runs through a helper of the
    project (``clip_gradient(optimizer, c)`` imported from ``utils``)."""
    if "clip_grad" in model.source:
        return True
    loops = {id(training.loop): training.loop, id(training.step_loop): training.step_loop}.values()
    return any(loop.events(Kind.CLIP, deep=True) for loop in loops)


def _through_factories(model: FileModel, calls: list[cst.Call] | None) -> list[cst.Call] | None:
    """``calls`` with each call of a factory function of this file (``optimizer = get_optimizer(model,
    cfg)``) replaced by the optimizer constructions it returns (``return torch.optim.Adam(params,
    lr=cfg.lr)``, or a name bound to one); None where a factory returns anything else, or is defined
    twice. A call of no function of the file is kept as it is (the caller judges its name)."""
    if calls is None:
        return None
    found: list[cst.Call] = []
    for call in calls:
        defined = model.index.functions.get(call.func.value, []) if isinstance(call.func, cst.Name) else []
        if not defined:
            found.append(call)
            continue
        if len(defined) != 1:
            return None
        returned = _returned_constructions(defined[0])
        if not returned:
            return None
        found.extend(returned)
    return found


def _returned_constructions(fn: cst.FunctionDef) -> list[cst.Call] | None:
    """The optimizer constructor calls ``fn`` returns: each ``return`` hands one back, directly or through
    the name it is bound to (every binding of that name in ``fn`` an optimizer's construction)."""
    returns = [n for n in walk(fn.body) if isinstance(n, cst.Return)]
    if not returns:
        return None
    found: list[cst.Call] = []
    for ret in returns:
        value = ret.value
        if isinstance(value, cst.Name):
            bound = [n.value for n in walk(fn.body) if isinstance(n, cst.Assign)
                     and any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in n.targets)]
            if not bound:
                return None
            values: list[cst.BaseExpression] = bound
        else:
            values = [value] if value is not None else []
        for v in values:
            if not isinstance(v, cst.Call) or role_of_constructor(func_name(v) or "") is not Role.OPTIMIZER:
                return None
            found.append(v)
    return found or None


def _lr_divided(model: FileModel, training: TrainingLoop, counts: set[str]) -> bool:
    """Every optimizer the loop steps is built in this file with a learning rate divided by N
    (Darknet's `base_lr = LR / batch_size / subdivision` for losses summed over the batch, or
    `args.lr /= args.grad_loop` once the options are parsed): the step is `lr / N` times the window's
    sum, which is `lr` times its mean."""
    calls = _built_here(model, {step.optimizer or step.receiver for step in training.steps}) if counts else None
    if calls is None:
        return False
    counts = counts | _nominal_batches(model, counts)
    for call in calls:
        args = positional(call)
        lr = keyword(call, "lr") or (args[1] if len(args) > 1 else None)
        if lr is None or not _divides_by(lr, counts, model):
            return False
    return True


def _lr_scaled_by_micro_batch(model: FileModel, counts: set[str]) -> bool:
    """The file scales its learning rate linearly by the micro-batch size and leaves N out of every
    such scaling (Detectron.pytorch: ``cfg.SOLVER.BASE_LR *= args.batch_size / original_batch_size``,
    "for iter_size > 1, gradients are accumulated, so lr is scaled based on batch_size instead of
    effective_batch_size"): the window's sum times that rate is the linear-scaling rule for the
    effective batch, N micro-batches times as large, not a step N times too large."""
    if not counts:
        return False
    scaled = False
    for node in walk(model.module, into_functions=True):
        if type(node) is cst.AugAssign and type(node.operator) is cst.MultiplyAssign:
            target, value = node.target, node.value
        elif type(node) is cst.Assign and len(node.targets) == 1:
            target, value = node.targets[0].target, node.value
        else:
            continue
        name = dotted(target)
        if name is None or not LR_NAME.search(last_part(name)):
            continue
        held = {n for v in names_in(value) for bound in model.index.values.get(last_part(v), [])
                for n in names_in(bound)}
        if any(last_part(n) in counts for n in names_in(value) | held):
            return False  # N scales it too (`total_batch_size = batch_size * accum`, then by that)
        numerators = value.left if type(value) is cst.BinaryOperation and type(value.operator) is cst.Divide \
            else value
        scaled |= any(BATCH_SIZE_NAME.search(last_part(n)) for n in names_in(numerators))
    return scaled


def _nominal_batches(model: FileModel, counts: set[str]) -> set[str]:
    """The batch sizes a loader's is made from by dividing by N (``DataLoader(..., batch_size=config.batch
    // config.subdivisions)``): each window of N micro-batches holds one such batch, so a learning rate
    divided by it (``config.learning_rate / config.batch``, Darknet's, for a loss summed over images) is
    divided by N too."""
    found = set()
    for call in model.index.calls:
        size = keyword(call, "batch_size")
        if type(size) is cst.BinaryOperation and type(size.operator) in (cst.FloorDivide, cst.Divide) \
                and any(last_part(n) in counts for n in names_in(size.right)) and dotted(size.left) is not None:
            found.add(last_part(dotted(size.left)))  # type: ignore[arg-type]
    return found


def _built_here(model: FileModel, names: set[str | None]) -> list[cst.Call] | None:
    """The constructor calls of the optimizers ``names``, or None where one is unnamed or built
    elsewhere (its hyperparameters cannot be read here)."""
    calls: list[cst.Call] = []
    for name in names:
        # another call building the name from scratch (`optimizer = BertAdam(params, ...)` in the
        # other branch of `if args.fp16:`) is an optimizer whose hyperparameters cannot be read here;
        # a call handed the optimizer itself wraps it (`FP16_Optimizer(optimizer)`, `prepare(optimizer)`)
        short = last_part(name) if name is not None else ""

        def wraps(call: cst.Call) -> bool:
            return any(short in {last_part(n) for n in names_in(a.value)} for a in call.args)

        found = [c for c in model.roles.constructors(name, Role.OPTIMIZER) if not wraps(c)] if name is not None else None
        if not found:
            # `optimizer = optimizer_class(...)`, the name bound only to optimizer classes
            found = [c for c in model.roles.constructed.get(short, []) if _bound_to_optimizer_classes(model, c)]
        configured = False
        if not found:  # `opt = self.optimizers()` of a LightningModule
            found = _configured_optimizers(model, short)
            configured = bool(found)
        if not found:
            return None
        if any(call not in found and not wraps(call) and not (configured and dotted(call.func) == "self.optimizers")
               for call in model.roles.constructed.get(short, [])):
            return None
        calls.extend(found)
    return calls or None


def _divides_by(expr: cst.BaseExpression, counts: set[str], model: FileModel, depth: int = 0) -> bool:
    """``expr`` divides by one of ``counts`` (``x / N``, ``x / batch_size / N``), itself or through the
    one value the file assigns to the name it is."""
    for node in walk(expr):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide) \
                and any(last_part(n) in counts for n in names_in(node.right)):
            return True
    name = dotted(expr)
    if name is not None and depth == 0 and any(
            isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign)
            and dotted(node.target) == name and any(last_part(n) in counts for n in names_in(node.value))
            for node in walk(model.module, into_functions=True)):
        return True  # `args.lr /= args.grad_loop` where the options are read (GraSP)
    values = model.index.values.get(last_part(name), []) if name is not None else []
    return depth < 3 and len(values) == 1 and _divides_by(values[0], counts, model, depth + 1)


def _direct_step(node: cst.CSTNode) -> bool:
    """``optimizer.step()`` or ``scaler.step(optimizer)``: torch's own step, nothing in between."""
    found = method(node) if isinstance(node, cst.Call) else None
    return found is not None and found[1] == "step"


def _divide_at_backward(model: FileModel, training: TrainingLoop, backward: Event,
                        n: cst.BaseExpression) -> Fix | None:
    """``(loss / N).backward()``, ``scaler.scale(loss / N)``: the division only where the gradient is
    made, so a ``total += loss.item()`` elsewhere keeps logging the undivided loss. ``N`` must mean
    the same where the backward is: the loop's own function, or a helper's parameter bound to it."""
    loss = backward.loss
    if loss is None or _tested_off(training, n):
        return None
    count = source(n) if isinstance(n, _ATOMIC) else f"({source(n)})"
    function = training.loop.function
    if any(s.origin is not function for s in training.steps):
        return None
    if backward.origin is not function:
        helper = backward.origin
        params = {p.name.value for p in helper.params.params} if helper is not None else set()
        bound = [a.names[0] for a in training.loop.assignments
                 if isinstance(a.node, cst.Call) and len(a.names) == 1 and a.names[0] in params and same(a.value, n)]
        if helper is None or len(bound) != 1 or not called_once(model, helper):
            return None
        count = bound[0]
    text = source(loss) if isinstance(loss, _ATOMIC) else f"({source(loss)})"
    call = backward.node
    receiver = isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.value is loss
    return replace(loss, f"({text} / {count})" if receiver else f"{text} / {count}",
                   f"divide the loss by {count} where it is back-propagated")


def _tested_off(training: TrainingLoop, n: cst.BaseExpression) -> bool:
    """The loop tests ``N`` for a value that turns accumulation off (``not N or (i + 1) % N == 0``,
    ``N is None``, ``N <= 1``): there ``N`` may be 0 or None, and ``loss / N`` would raise or give inf."""
    for event in training.loop.events(deep=True):
        for cond in event.conds:
            for node in walk(cond.test) if cond.test is not None else ():
                if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) \
                        and same(node.expression, n):
                    return True
                if isinstance(node, cst.Comparison) and same(node.left, n) and len(node.comparisons) == 1:
                    comparison = node.comparisons[0]
                    bound = int_value(comparison.comparator)
                    if isinstance(comparison.comparator, cst.Name) and comparison.comparator.value == "None" \
                            or isinstance(comparison.operator, (cst.Equal, cst.NotEqual)) and bound == 0 \
                            or isinstance(comparison.operator, (cst.LessThanEqual, cst.GreaterThan)) and bound in (0, 1) \
                            or isinstance(comparison.operator, (cst.LessThan, cst.GreaterThanEqual)) and bound in (1, 2):
                        return True
    return False
