"""A horizon divided by the loop's literal accumulation count counts optimizer steps: Feedback
Prize's ``num_batches = len(training_loader)/8`` stepped under ``if n == 8:`` has the schedule end with
the training (no LC303); the batches undivided would run it eight times too long."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import torch
from transformers import get_polynomial_decay_schedule_with_warmup

optimizer = torch.optim.Adam(params=model.parameters(), lr=1e-5)
num_batches = {batches}
total_train_steps = int(num_batches * config['epochs'])
sched = get_polynomial_decay_schedule_with_warmup(optimizer, num_warmup_steps=int(0.1 * total_train_steps),
                                                  num_training_steps=total_train_steps)
for epoch in range(config['epochs']):
    n = 0
    for idx, batch in enumerate(training_loader):
        loss = model(batch).mean()
        n += 1
        loss.backward()
        if n == 8:
            optimizer.step()
            sched.step()
            optimizer.zero_grad()
            n = 0
"""


@pytest.mark.parametrize(("batches", "found"), [
    ("len(training_loader)/8", 0),
    ("len(training_loader)//8", 0),
    ("len(training_loader)", 1),
])
def test_a_horizon_divided_by_the_literal_count(batches: str, found: int) -> None:
    source = textwrap.dedent(LOOP.format(batches=batches))
    assert len([f for f in check_text(source, "train.py", resolve()) if f.code == "LC303"]) == found
