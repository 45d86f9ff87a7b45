"""A clip after an ``if``/``else`` that steps the optimizer in both branches (``if self.scaler:
scaler.step(opt) else: opt.step()``) runs after the step on every path: LC107, with no fix (moving
it before one branch's step would leave the other unclipped). A trainer clips ``self.model``, the
module its caller built as ``model`` and handed in: the optimizer's own. Clipping after the step is
wrong whatever the accumulation count is, so the message names no setting."""

from __future__ import annotations

from loopcheck.engine import analyse, check_source

TRAINER = """
import torch


class Trainer:
    def __init__(self, model, optimizer, scaler, grad_accum_steps):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.grad_accum_steps = grad_accum_steps

    def train_one_epoch(self, loader):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.grad_accum_steps
            loss.backward()
            if (i + 1) % self.grad_accum_steps == 0:
                if self.scaler:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    self.optimizer.step()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.zero_grad()


def main(loader):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    Trainer(model, optimizer, None, 4).train_one_epoch(loader)
"""


def test_a_clip_after_both_branches_step_is_after_the_step() -> None:
    (finding,) = check_source(TRAINER, select=["LC107"])
    assert finding.line == 22
    assert finding.message.startswith("gradients are clipped after the optimizer step")
    assert "only when" not in finding.message


def test_no_fix_moves_it_before_one_branch() -> None:
    _, ((finding, fix),) = analyse(TRAINER, "trainer.py", frozenset({"LC107"}))
    assert finding.code == "LC107" and fix is None


def test_a_clip_before_the_branches_is_not_after_the_step() -> None:
    moved = TRAINER.replace("                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n", "")
    moved = moved.replace("                if self.scaler:\n",
                          "                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"
                          "                if self.scaler:\n")
    assert check_source(moved, select=["LC107"]) == []
