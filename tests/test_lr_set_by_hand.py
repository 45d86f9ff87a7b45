"""LC303 for a learning rate the loop sets by hand from a schedule function of the file."""
from __future__ import annotations

from loopcheck.engine import check_source

NANOVLM = '''
import math


def get_lr(it, max_lr, max_steps):
    min_lr = max_lr * 0.1
    warmup_steps = max_steps * 0.03
    if it < warmup_steps:
        return max_lr * (it + 1) / warmup_steps
    if it > max_steps:
        return min_lr
    decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (max_lr - min_lr)


def train(train_cfg, model, optimizer, train_loader):
    global_step = 0
    for epoch in range(train_cfg.epochs):
        optimizer.zero_grad()
        for i, batch in enumerate(train_loader):
            loss = model(batch) / train_cfg.gradient_accumulation_steps
            loss.backward()
            if (i + 1) % train_cfg.gradient_accumulation_steps == 0 or i + 1 == len(train_loader):
                adj_lr_mp = get_lr(global_step, train_cfg.lr_mp, len(train_loader) * train_cfg.epochs)
                adj_lr_backbones = get_lr(global_step, train_cfg.lr_backbones, len(train_loader) * train_cfg.epochs)
                optimizer.param_groups[0]['lr'] = adj_lr_mp
                optimizer.param_groups[1]['lr'] = adj_lr_backbones
                optimizer.step()
                optimizer.zero_grad()
                global_step += 1
'''


def _lc303(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_source(source, filename="train.py", select=["LC303"])]


def test_a_step_count_of_updates_over_a_horizon_of_batches():
    assert _lc303(NANOVLM) == [(24, "`get_lr()` sets the learning rate by `global_step`, which counts optimizer steps, "
                                    "but its horizon `len(train_loader) * train_cfg.epochs` counts batches: the "
                                    "schedule reaches only 1/N of its length")]


def test_the_horizon_divided_by_the_accumulation_count_is_silent():
    fixed = NANOVLM.replace("len(train_loader) * train_cfg.epochs)",
                            "len(train_loader) * train_cfg.epochs // train_cfg.gradient_accumulation_steps)")
    assert _lc303(fixed) == []


def test_the_loop_index_over_a_horizon_of_updates_ends_early():
    by_index = NANOVLM.replace("get_lr(global_step,", "get_lr(i + epoch * len(train_loader),") \
        .replace("len(train_loader) * train_cfg.epochs)", "len(train_loader) * train_cfg.epochs // "
                 "train_cfg.gradient_accumulation_steps)")
    assert _lc303(by_index) == []  # not a name: what the sum counts is not read
    counted = NANOVLM.replace("get_lr(global_step,", "get_lr(i,").replace(
        "len(train_loader) * train_cfg.epochs)", "len(train_loader) // train_cfg.gradient_accumulation_steps)")
    assert [message.rsplit(": ", 1)[1] for _, message in _lc303(counted)] == ["the schedule ends N times too early"]


def test_a_function_that_relates_no_two_of_its_parameters_is_no_schedule():
    flat = NANOVLM.replace("decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)", "decay_ratio = 0.5") \
        .replace("if it > max_steps:", "if it > 10 ** 6:")
    assert _lc303(flat) == []


def test_without_accumulation_a_batch_is_an_update():
    plain = NANOVLM.replace("(i + 1) % train_cfg.gradient_accumulation_steps == 0 or i + 1 == len(train_loader)",
                            "True").replace(" / train_cfg.gradient_accumulation_steps", "")
    assert _lc303(plain) == []
