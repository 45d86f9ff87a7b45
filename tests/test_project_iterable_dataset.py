"""``next(iter(loader))`` per update over a loader of an ``IterableDataset`` class that a project
module defines (FinRL's portfolio agent: ``RLDataset(self.train_buffer)``, whose ``__iter__`` yields the
replay buffer's fresh sample) starts a new draw of the stream, not the loader's first batch: no LC604.
The same loader over a map-style dataset class of that module keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

UTILS = """
    from torch.utils.data import {base}


    class RLDataset({base}):
        def __init__(self, buffer):
            self.buffer = buffer

        def __iter__(self):
            yield from self.buffer.sample()

        def __getitem__(self, i):
            return self.buffer[i]

        def __len__(self):
            return len(self.buffer)
"""

AGENT = """
    import torch
    from torch.utils.data import DataLoader

    from utils import RLDataset


    class PolicyGradient:
        def __init__(self, policy, buffer, batch_size=64):
            self.policy = policy
            self.optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
            dataset = RLDataset(buffer)
            self.train_dataloader = DataLoader(dataset=dataset, batch_size=batch_size, shuffle=False)

        def train(self, episodes):
            for episode in range(episodes):
                obs, actions = next(iter(self.train_dataloader))
                loss = -self.policy(obs).gather(1, actions).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
"""


@pytest.mark.parametrize(("base", "found"), [("IterableDataset", 0), ("Dataset", 1)])
def test_a_stream_of_a_project_module_is_drawn_anew(project: Path, run_cli, base: str, found: int) -> None:
    write_project(project, {"utils.py": UTILS.format(base=base), "agent.py": AGENT})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC604", "agent.py")
    assert out.count(": LC604") == found, out
