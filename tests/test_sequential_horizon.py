"""LC303 through `SequentialLR`: the horizon of the schedule it ends with (a cosine after a warmup)."""
from __future__ import annotations

from loopcheck.engine import check_source

INLINE = '''
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR


def train(model, optimizer, train_dl, num_epochs, warmup_steps, gradient_accumulation_steps):
    total_steps = num_epochs * len(train_dl)
    decay_steps = total_steps - warmup_steps
    scheduler = SequentialLR(
        optimizer=optimizer,
        schedulers=[
            LinearLR(optimizer, start_factor=1.0 / warmup_steps, total_iters=warmup_steps),
            CosineAnnealingLR(optimizer, T_max=decay_steps),
        ],
        milestones=[warmup_steps],
    )
    for epoch in range(num_epochs):
        for batch_i, batch in enumerate(train_dl, start=1):
            loss = model(batch) / gradient_accumulation_steps
            loss.backward()
            if batch_i % gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
'''

FACTORY = '''
from torch.optim import AdamW
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR


def build_optimizer_and_scheduler(model, config):
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = AdamW(params, lr=config.lr)
    warmup_steps = int(config.total_steps * config.warmup_fraction)
    warmup = LinearLR(optimizer, start_factor=0.01, total_iters=warmup_steps)
    cosine = CosineAnnealingLR(optimizer, T_max=config.total_steps - warmup_steps)
    scheduler = SequentialLR(optimizer, [warmup, cosine], milestones=[warmup_steps])
    return optimizer, scheduler


def train(model, loader, config):
    optimizer, scheduler = build_optimizer_and_scheduler(model, config)
    step = 0
    while step < config.total_steps:
        for batch in loader:
            if step >= config.total_steps:
                break
            (model(batch) / config.accum_freq).backward()
            if (step + 1) % config.accum_freq == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
            step += 1
'''


def _lc303(source: str) -> list[str]:
    return [f.message for f in check_source(source, filename="train.py", select=["LC303"])]


def test_the_cosine_after_a_warmup_gives_the_horizon():
    assert _lc303(INLINE) == [
        "`scheduler` is stepped once per optimizer step but its horizon `decay_steps` counts batches"]


def test_counted_in_optimizer_steps_it_is_silent():
    updates = INLINE.replace("total_steps = num_epochs * len(train_dl)",
                             "total_steps = num_epochs * len(train_dl) // gradient_accumulation_steps")
    assert _lc303(updates) == []


def test_a_schedule_bound_to_a_name_first():
    named = INLINE.replace("            CosineAnnealingLR(optimizer, T_max=decay_steps),\n", "            cosine,\n") \
        .replace("    scheduler = SequentialLR(", "    cosine = CosineAnnealingLR(optimizer, T_max=decay_steps)\n"
                                                "    scheduler = SequentialLR(")
    assert len(_lc303(named)) == 1


def test_a_last_schedule_without_a_horizon_says_nothing():
    constant = INLINE.replace("CosineAnnealingLR(optimizer, T_max=decay_steps)", "ConstantLR(optimizer, factor=0.5)")
    assert _lc303(constant) == []


def test_a_factory_of_the_file_returning_the_sequence():
    assert _lc303(FACTORY) == [
        "`scheduler` is stepped once per optimizer step but its horizon `config.total_steps - "
        "int(config.total_steps * config.warmup_fraction)` counts batches (built by `build_optimizer_and_scheduler`)"]


WRAPPED_IN_ITSELF = '''
import torch
from .scheduler import GradualWarmupScheduler


def set_optimizer(model, defs):
    optimizer = torch.optim.SGD(model.parameters(), lr=defs.lr)
    if defs.scheduler == "linear":
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[defs.epochs // 2])
    if defs.warmup:
        scheduler = GradualWarmupScheduler(optimizer, multiplier=10, total_epoch=10, after_scheduler=scheduler)
    return optimizer, scheduler


def train(model, loader, defs):
    optimizer, scheduler = set_optimizer(model, defs)
    for epoch in range(defs.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            model(x, y).backward()
            optimizer.step()
        scheduler.step()
'''


def test_a_schedule_that_wraps_the_one_its_name_held_is_read_without_end():
    findings = check_source(WRAPPED_IN_ITSELF, filename="training_routine.py", select=["ALL"])
    assert [f.code for f in findings] == []


ALIASED = '''
from torch.optim.lr_scheduler import CosineAnnealingLR


def train(model, optimizer, loader, config):
    cosine = CosineAnnealingLR(optimizer, T_max=config.total_steps)
    scheduler = cosine
    step = 0
    while step < config.total_steps:
        for batch in loader:
            if step >= config.total_steps:
                break
            (model(batch) / config.accum_freq).backward()
            if (step + 1) % config.accum_freq == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
            step += 1
'''


def test_a_scheduler_name_bound_to_another_reads_that_ones_horizon():
    assert _lc303(ALIASED) == [
        "`scheduler` is stepped once per optimizer step but its horizon `config.total_steps` counts batches"]
    # a name bound to two different schedules holds either: neither horizon is known to be the stepped one
    twice = ALIASED.replace("    scheduler = cosine\n", "    scheduler = cosine if config.cosine else constant\n")
    assert _lc303(twice) == []


def test_the_loop_bound_less_a_warmup_through_a_name():
    named = ALIASED.replace("    cosine = CosineAnnealingLR(optimizer, T_max=config.total_steps)\n",
                            "    warmup_steps = int(config.total_steps * 0.1)\n"
                            "    decay_steps = config.total_steps - warmup_steps\n"
                            "    cosine = CosineAnnealingLR(optimizer, T_max=decay_steps)\n")
    assert _lc303(named) == [
        "`scheduler` is stepped once per optimizer step but its horizon `decay_steps` counts batches"]
    # less a literal, the rest is no share of the bound the file shows
    assert _lc303(named.replace("config.total_steps - warmup_steps", "config.total_steps - 100")) == []
