"""How the loss handed to backward was scaled, where it comes from a call on ``self``."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_TRAINER = """
import torch
from torch import nn


class Trainer:
    def __init__(self, model, n):
        self.model = model
        self.{attr} = nn.MSELoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.n = n
{extra}
    def train_epoch(self, loader):
        for i, (x, y) in enumerate(loader):
            loss = self.{call}(self.model(x), y)
            loss.backward()
            if (i + 1) % self.n == 0 or (i + 1) == len(loader):
                self.optimizer.step()
                self.optimizer.zero_grad()
"""

_METHOD = """
    def {name}(self, out, y):
        return nn.functional.mse_loss(out, y) / self.n
"""


@pytest.mark.parametrize(("attr", "call", "extra", "flagged"), [
    ("criterion", "criterion", "", True),  # a loss module the trainer holds: one micro-batch's mean
    ("loss_fn", "loss_fn", "", True),
    ("loss", "loss", "", True),
    ("mse_criterion", "mse_criterion", "", True),
    # a method of the class may normalise (here it divides by N)
    ("criterion", "compute_loss", _METHOD.format(name="compute_loss"), False),
    ("criterion", "criterion", _METHOD.format(name="criterion"), False),
    # a method of a base class in another module: not named like a loss module, may normalise
    ("criterion", "forward_propagation", "", False),
    ("criterion", "criterion.inner", "", False),
])
def test_a_loss_module_held_on_self_returns_a_raw_loss(attr: str, call: str, extra: str, flagged: bool) -> None:
    code = _TRAINER.format(attr=attr, call=call, extra=textwrap.indent(textwrap.dedent(extra), ""))
    findings = check_text(code, "trainer.py", resolve(select=["LC102"]))
    assert bool(findings) is flagged
