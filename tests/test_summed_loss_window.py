"""LC102 and a loss summed over the micro-batch's samples: the window's undivided sum is the summed
loss of a batch N times larger (what a summed loss means), not N means added up."""
from __future__ import annotations

import pytest

from loopcheck.engine import check_source

LOOP = '''
import torch
import torch.nn.functional as F

loss_function = torch.nn.BCELoss(reduction="none")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    LOSS
    loss.backward()
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
'''


@pytest.mark.parametrize(("loss", "reported"), [
    ("loss = loss_function(model(x), y)\n    loss = torch.sum(loss)", False),
    ("loss = loss_function(model(x), y).sum()", False),
    ("loss = F.mse_loss(model(x), y, reduction='sum')", False),
    ("loss = torch.sum(F.l1_loss(model(x), y, reduction='none'))", False),
    ("loss = loss_function(model(x), y).mean()", True),  # a mean of each micro-batch: N means add up
    ("loss = F.mse_loss(model(x), y).sum()", True),  # the sum of a mean is the mean
    ("loss = F.mse_loss(model(x), y)", True),
])
def test_a_sum_over_the_samples_is_not_a_mean_taken_n_times(loss: str, reported: bool):
    findings = check_source(LOOP.replace("LOSS", loss), filename="train.py", select=["LC102"])
    assert [f.code for f in findings] == (["LC102"] if reported else [])
