"""A step helper that returns early on a non-finite loss before it sets its step flag: the flag
still reads as the step condition (LC105)."""
from __future__ import annotations

from loopcheck.engine import check_source

TRAINER = '''
import torch


class Trainer:
    def train_step(self, batch, accumulation_step):
        self.model.train()
        grad_accum_steps = self.config["training"]["gradient_accumulation_steps"]
        loss = self.model(batch).mean() / grad_accum_steps
        if not torch.isfinite(loss):
            return float("nan")
        loss.backward()
        is_accumulation_step = (accumulation_step + 1) % grad_accum_steps == 0
        if is_accumulation_step:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss.item()

    def train_epoch(self):
        for step, batch in enumerate(self.train_loader):
            self.train_step(batch, accumulation_step=step)

    def train(self, epochs):
        for epoch in range(epochs):
            self.train_epoch()
'''


def _lc105(source: str) -> list[int]:
    return [f.line for f in check_source(source, filename="train.py", select=["LC105"])]


def test_the_flag_set_after_a_skip_of_a_bad_loss_is_read():
    assert _lc105(TRAINER) == [13]


def test_the_same_without_the_skip():
    assert _lc105(TRAINER.replace('            return float("nan")\n', '            print("nan")\n')) == [13]

