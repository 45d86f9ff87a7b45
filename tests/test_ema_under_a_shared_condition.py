"""An EMA update that runs with every backward under a condition around the whole train step
(Unicorn's ``if self.iter < self.max_iter:`` before ``self.train_one_iter_uni(...)``) is updated on
every micro-batch (LC401), as it is without that condition. In the step branch it is not; a condition
that is itself a window test is not set aside."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

TRAINER = """
class Trainer:
    def train_in_iter(self):
        for self.iter, data in enumerate(self.train_loader):
            if {around}:
                self.train_one_iter(data)

    def train_one_iter(self, data):
        loss = self.model(data).mean() / self.grad_acc_step
        self.scaler.scale(loss).backward()
        if (self.iter + 1) % self.grad_acc_step == 0:
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
            {in_step}
        {after}
"""


@pytest.mark.parametrize(("around", "in_step", "after", "found"), [
    ("self.iter < self.max_iter", "pass", "self.ema_model.update(self.model)", 1),
    ("True", "pass", "self.ema_model.update(self.model)", 1),
    ("self.iter < self.max_iter", "self.ema_model.update(self.model)", "pass", 0),
])
def test_an_ema_update_under_the_condition_around_the_train_step(around: str, in_step: str, after: str,
                                                                 found: int) -> None:
    source = textwrap.dedent(TRAINER.format(around=around, in_step=in_step, after=after))
    assert len([f for f in check_text(source, "trainer.py", resolve()) if f.code == "LC401"]) == found
