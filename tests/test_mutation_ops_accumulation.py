"""benchmarks/mutation/ops_accumulation: each operator injects only into a loop that accumulates."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.mutation import ops_accumulation as ops  # noqa: E402

PERIODIC = """\
import torch

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 2), torch.randn(4, 1))] * 10
N = 4
sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=len(loader) // N)
for i, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean()
    loss = loss / N
    loss.backward()
    if (i + 1) % N == 0 or (i + 1) == len(loader):
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
"""

NO_ACCUMULATION = """\
import torch

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
loader = [(torch.randn(4, 2), torch.randn(4, 1))] * 10
for i, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean()
    loss = loss / 2
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
    if (i + 1) % 4 == 0 or (i + 1) == len(loader):
        print(i)
"""

MICRO = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(torch.nn.Linear(2, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 8
for it in range(steps):
    for micro_step in range(steps_per_window):
        model.require_backward_grad_sync = (micro_step == steps_per_window - 1)
        loss = model(torch.randn(4, 2)).mean()
        loss = loss / steps_per_window
        loss.backward()
    opt.step()
    ema.update(model)
    opt.zero_grad(set_to_none=True)
"""


def mutants(source: str, op) -> list:
    tree = ast.parse(source)
    found = list(op(source, tree))
    for m in found:
        assert m.source.count("\n") == source.count("\n")
        compile(m.source, "<mutant>", "exec")
    return found


def test_zero_grad_moves_before_every_backward_of_an_accumulating_loop():
    [m] = mutants(PERIODIC, ops.zero_grad_every_micro_batch)
    assert (m.code, m.line) == ("LC101", 11)
    lines = m.source.splitlines()
    assert lines[10] == "    opt.zero_grad(); loss.backward()"
    assert lines[15] == "        pass"
    assert mutants(NO_ACCUMULATION, ops.zero_grad_every_micro_batch) == []


CONFIG_FIELD = """\
from dataclasses import dataclass

import torch


@dataclass
class TrainArgs:
    grad_acc_steps: int = 1


args = TrainArgs()
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(10):
    loss = model(torch.randn(4, 2)).mean() / args.grad_acc_steps
    loss.backward()
    if (i + 1) % args.grad_acc_steps == 0:
        opt.step()
        opt.zero_grad()
"""


@pytest.mark.parametrize("setting, windows", [
    ("", 0),  # 1 as the file ships it: nothing accumulates
    ("args = TrainArgs(grad_acc_steps=4)", 1),
    ("parser.add_argument('--grad-acc-steps', type=int, default=1)", 1),
    ("args.grad_acc_steps = 4", 1),
])
def test_a_count_the_file_binds_only_to_one_is_no_window(setting, windows):
    source = CONFIG_FIELD.replace("args = TrainArgs()\n", f"args = TrainArgs()\n{setting}\n")
    assert len(ops.windows(source, ast.parse(source))) == windows
    assert len(mutants(source, ops.zero_grad_every_micro_batch)) == windows


def test_micro_step_loop_is_a_window_but_a_literal_single_micro_step_is_not():
    [m] = mutants(MICRO, ops.zero_grad_every_micro_batch)
    assert m.source.splitlines()[11] == "        opt.zero_grad(set_to_none=True); loss.backward()"
    assert mutants(MICRO.replace("range(steps_per_window)", "range(1)"), ops.zero_grad_every_micro_batch) == []


@pytest.mark.parametrize(("source", "line", "text"), [
    (PERIODIC, 10, "    pass"),
    (MICRO, 11, "        pass"),
    (PERIODIC.replace("    loss = loss / N\n    loss.backward()", "    loss = loss\n    (loss / N).backward()"), 11,
     "    (loss).backward()"),
])
def test_the_division_by_the_window_count_is_removed(source, line, text):
    [m] = mutants(source, ops.loss_not_divided)
    assert m.line == line and m.source.splitlines()[line - 1] == text


def test_no_division_removed_where_the_count_differs_or_adam_clips_nothing():
    assert mutants(PERIODIC.replace("loss / N", "loss / 3"), ops.loss_not_divided) == []
    adam = PERIODIC.replace("torch.optim.SGD", "torch.optim.AdamW").replace(
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "        pass\n")
    assert mutants(adam, ops.loss_not_divided) == []
    assert mutants(NO_ACCUMULATION, ops.loss_not_divided) == []


def test_the_last_batch_term_and_the_boundary():
    [m] = mutants(PERIODIC, ops.last_window_term_removed)
    assert m.source.splitlines()[11] == "    if (i + 1) % N == 0:"
    [m] = mutants(PERIODIC, ops.boundary_off_by_one)
    assert m.source.splitlines()[11] == "    if (i) % N == 0 or (i + 1) == len(loader):"
    one_based = PERIODIC.replace("enumerate(loader)", "enumerate(loader, start=1)")
    assert mutants(one_based, ops.boundary_off_by_one) == []
    assert mutants(PERIODIC.replace(" or (i + 1) == len(loader)", ""), ops.last_window_term_removed) == []


def test_clip_scheduler_and_ema_leave_the_step_block():
    [clip] = mutants(PERIODIC, ops.clip_every_micro_batch)
    assert clip.source.splitlines()[10].startswith("    loss.backward(); torch.nn.utils.clip_grad_norm_(")
    [sched] = mutants(PERIODIC, ops.scheduler_every_micro_batch)
    assert sched.line == 16
    assert sched.source.splitlines()[14:16] == ["        opt.zero_grad()", "    sched.step()"]
    in_micro_batches = PERIODIC.replace("total_steps=len(loader) // N", "total_steps=len(loader)")
    assert mutants(in_micro_batches, ops.scheduler_every_micro_batch) == []
    unscaled = PERIODIC.replace("        torch.nn.utils.clip", "        scaler.unscale_(opt); torch.nn.utils.clip")
    assert mutants(unscaled, ops.clip_every_micro_batch) == []
    [ema] = mutants(MICRO, ops.ema_every_micro_batch)
    assert ema.source.splitlines()[11] == "        loss.backward(); ema.update(model)"
    assert mutants(NO_ACCUMULATION, ops.scheduler_every_micro_batch) == []


def test_sync_switch_removed_or_inverted_only_in_a_loop_that_backpropagates():
    [removed] = mutants(MICRO, ops.no_sync_removed)
    assert removed.source.splitlines()[8] == "        pass"
    [inverted] = mutants(MICRO, ops.sync_inverted)
    assert inverted.source.splitlines()[8].endswith("= (not (micro_step == steps_per_window - 1))")
    with_block = MICRO.replace("        model.require_backward_grad_sync = (micro_step == steps_per_window - 1)\n",
                               "        with model.no_sync():\n")
    with_block = with_block.replace("        loss = model", "            loss = model")
    [m] = mutants(with_block, ops.no_sync_removed)
    assert m.source.splitlines()[8] == "        if True:"
    assert mutants(MICRO.replace("loss.backward()", "pass"), ops.no_sync_removed) == []
    assert mutants(MICRO.replace("DDP(torch", "FSDP(torch"), ops.no_sync_removed) == []


def test_accelerate_model_zero_grad_only_with_an_accumulation_setting():
    source = """\
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    if accelerator.sync_gradients:
        ema.step(model.parameters())
        global_step += 1
"""
    assert mutants(source, ops.zero_grad_unprepared) == []
    configured = "accelerator = Accelerator(gradient_accumulation_steps=4)\n" + source
    [m] = mutants(configured, ops.zero_grad_unprepared)
    assert m.source.splitlines()[6] == "        model.zero_grad()"
    [ema] = mutants(configured, ops.ema_every_micro_batch)
    assert ema.source.splitlines()[8:10] == ["        global_step += 1", "    ema.step(model.parameters())"]
