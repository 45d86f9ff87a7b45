"""What findings say about real code: the message must describe what happens there."""

from __future__ import annotations

from loopcheck.engine import check_source

LOADER_RESTARTED = """
import torch

loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4)
for step in range(1000):
    x, y = next(iter(loader))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_lc604_names_the_restart_cost_not_a_first_batch() -> None:
    (finding,) = check_source(LOADER_RESTARTED, select=["LC604"])
    # a shuffling loader yields a random batch each time: the cost is the restart, not a repeated batch
    assert "worker processes" in finding.message and "new permutation" in finding.message
    assert "yields its first batch" not in finding.message
