"""benchmarks/mutation/ops_schedule.py: each operator injects its pitfall only where it really happens."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

AMP = """\
import torch

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
scaler = torch.cuda.amp.GradScaler()
ema = ModelEma(model)
for epoch in range(90):
    model.train()
    total = 0.0
    it = iter(loader)
    for _ in range(len(loader)):
        x, y = next(it)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        ema.update(model)
        total += loss.item()
    scheduler.step()
    evaluate(ema.module)
    model.eval()
    validate(model)
"""

PLAIN = """\
for epoch in range(90):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
"""


@pytest.fixture
def ops(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.mutation import ops_schedule

    assert sys.modules["benchmarks.mutation.ops_schedule"] is ops_schedule
    return ops_schedule


def mutants(op, source):
    found = list(op(source, ast.parse(source)))
    for m in found:
        assert m.source.count("\n") == source.count("\n")
        compile(m.source, "<mutant>", "exec")
    return found


def changed_lines(source, mutant):
    return {i + 1: new.strip() for i, (old, new) in enumerate(zip(source.splitlines(), mutant.source.splitlines()))
            if old != new}


def test_each_operator_injects_its_pitfall_into_a_loop_that_has_it_right(ops):
    made = {op.__name__: mutants(op, AMP) for op in ops.OPERATORS}
    edits = {name: [changed_lines(AMP, m) for m in ms] for name, ms in made.items()}
    assert edits["zero_grad_removed"] == [{14: "pass"}]
    assert edits["zero_grad_moved_after_backward"] == [{14: "pass", 16: "scaler.scale(loss).backward(); optimizer.zero_grad()"}]
    assert edits["unscale_removed"] == [{17: "pass"}]
    assert edits["scaler_update_removed"] == [{20: "pass"}]
    assert edits["scaler_step_bypassed"] == [{19: "optimizer.step()", 20: "pass"}]
    assert edits["scheduler_moved_across_loops"] == [{19: "scaler.step(optimizer); scheduler.step()", 23: "pass"}]
    assert edits["ema_update_removed"] == [{21: "pass"}]
    assert edits["item_dropped"] == [{22: "total += loss"}]
    assert edits["iterator_recreated"] == [{13: "x, y = next(iter(loader))"}]
    assert edits["train_mode_removed"] == [{9: "pass"}]
    assert {m.code for ms in made.values() for m in ms} == {
        "LC103", "LC104", "LC201", "LC202", "LC203", "LC303", "LC402", "LC601", "LC604", "LC605"}


def test_no_mutant_where_the_edit_would_not_be_a_pitfall(ops):
    # a second clearing of the gradients, a disabled scaler, a clip before unscale_, the loss summed
    # into a total made fresh each iteration, an iterator re-made on purpose, train() elsewhere too
    source = (AMP.replace("scaler = torch.cuda.amp.GradScaler()", "scaler = torch.cuda.amp.GradScaler(enabled=False)")
              .replace("        total += loss.item()\n", "        total = 0; total += loss.item()\n")
              .replace("    scheduler.step()\n", "    model.zero_grad()\n")
              .replace("    validate(model)\n", "    model.train()\n"))
    source = source.replace("    it = iter(loader)\n", "    it = make(loader)\n")
    assert source.count("\n") == AMP.count("\n")
    for op in (ops.zero_grad_removed, ops.unscale_removed, ops.scaler_update_removed, ops.scaler_step_bypassed,
               ops.item_dropped, ops.iterator_recreated, ops.train_mode_removed, ops.scheduler_moved_across_loops):
        assert mutants(op, source) == [], op.__name__


def test_scheduler_stepped_per_batch_moves_before_the_step_only_when_after_it(ops):
    made = mutants(ops.scheduler_before_optimizer, PLAIN)
    assert [changed_lines(PLAIN, m) for m in made] == [{6: "scheduler.step(); optimizer.step()", 7: "pass"}]
    assert made[0].code == "LC302"
    swapped = PLAIN.replace("        optimizer.step()\n        scheduler.step()\n",
                            "        scheduler.step()\n        optimizer.step()\n")
    assert mutants(ops.scheduler_before_optimizer, swapped) == []


def test_a_zero_grad_after_the_step_is_not_moved_and_an_epoch_scheduler_needs_its_class(ops):
    after = PLAIN.replace("        optimizer.zero_grad()\n", "        pass\n").replace(
        "        scheduler.step()\n", "        optimizer.zero_grad()\n")
    assert mutants(ops.zero_grad_moved_after_backward, after) == []
    # PLAIN does not build its scheduler: its unit is unknown
    assert mutants(ops.scheduler_moved_across_loops, PLAIN) == []


def test_the_refill_after_stop_iteration_is_not_made_a_fresh_iterator(ops):
    source = """\
it = iter(loader)
for step in range(1000):
    try:
        x = next(it)
    except StopIteration:
        it = iter(loader)
        x = next(it)
    loss = model(x)
    loss.backward()
    optimizer.step()
"""
    assert [m.line for m in mutants(ops.iterator_recreated, source)] == [4]
