"""## What it does
Checks that, under gradient accumulation, the loss handed to `backward()` is divided by the
number of accumulated micro-batches (or normalised by a window-wide count).

## Why is this bad?
`backward()` sums gradients across the window. Without `loss / N` the optimizer step sees the
sum of N micro-batch gradients instead of their mean: every update is N times too large, and
changing N silently changes the effective learning rate. `accelerator.backward(loss)` divides by
N itself, and a loss the author scales explicitly (`* batch_size`, a token count) is left alone;
a manual fp16 loss scale (`loss * 2 ** lg_loss_scale`) is undone before the step and divides
nothing. Dividing by a running count (`k += 1; loss / k`) weighs the k-th micro-batch of a window
1/k: the first micro-batch counts as much as all the others together. Inner loops that split or
replay the loader's own batch (chunks of one batch, GradCache-style re-forwarding) are left alone:
whether their sum is right depends on the loss's reduction.

## Fix
Divide before back-propagating: `loss = loss / accum_steps`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.fixes import insert_before
from loopcheck.model import FileModel, Framework, Style
from loopcheck.model.loss import Scaling, loss_scaling
from loopcheck.model.syntax import dotted, names_in, source
from loopcheck.model.training import is_data_loop
from loopcheck.rules._base import Rule, Violation


class UnscaledAccumulatedLoss(Rule):
    code = "LC102"
    message = "the accumulated loss is not divided by the number of micro-batches: every step is N times too large"
    fixable = True

    VALID = [
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
    ]
    INVALID = [
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
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        helpers = set(model.index.functions)
        for training in model.training_loops:
            if training.style not in (Style.GUARDED, Style.MICRO_LOOP):
                continue
            if training.style is Style.MICRO_LOOP and is_data_loop(training.step_loop):
                # the micro-steps split or replay the loader's batch (flair's chunks of one batch with
                # summed losses, open_clip's GradCache): whether the sum is right depends on the loss
                continue
            n = training.modulus
            accumulation_names = {name.rsplit(".", 1)[-1] for name in names_in(n)} if n is not None else set()
            for backward in training.backwards:
                if backward.framework not in (Framework.TORCH, Framework.LOSS_SCALER) or backward.loss is None:
                    continue
                if not training.guard(backward).always:
                    continue
                scaling = loss_scaling(backward.loss, backward.loop, backward.order, helpers,  # type: ignore[arg-type]
                                       accumulation_names)
                count = f"`{source(n)}`" if n is not None else "N"
                if scaling is Scaling.RUNNING:
                    yield self.at(backward, "the loss is divided by a running count of micro-batches, so the k-th "
                                            "micro-batch of a window weighs 1/k: divide every micro-batch by the "
                                            f"same {count}")
                elif scaling is Scaling.RAW:
                    loss = dotted(backward.loss)
                    fix = insert_before(backward.stmt, f"{loss} = {loss} / {source(n)}", f"divide `{loss}` by {count}") \
                        if n is not None and loss is not None and "." not in loss else None
                    yield self.at(backward, f"the loss is back-propagated on every micro-batch without being divided "
                                            f"by {count}: each optimizer step is {count} times too large", fix)
