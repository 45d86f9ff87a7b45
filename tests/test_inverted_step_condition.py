"""LC106 on a step condition whose polarity is inverted (`if batches_done % N:`): run on the CPU, the
loop steps on every micro-batch but each N-th, in windows of one and two micro-batches."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_LOOP = """
import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randn(2, 4) for _ in range(6)]
windows, size = [], 0
for epoch in range(1):
    for batch_i, x in enumerate(loader):
        batches_done = len(loader) * epoch + batch_i
        model(x).mean().backward()
        size += 1
        if batches_done % {n}:
            optimizer.step()
            optimizer.zero_grad()
            windows.append(size)
            size = 0
"""


@pytest.mark.parametrize(("n", "windows", "reported"), [(3, [2, 1, 2, 1], True), (2, [2, 2, 2], False)])
def test_an_inverted_step_condition_steps_on_all_but_every_nth_micro_batch(n: int, windows: list[int],
                                                                          reported: bool) -> None:
    pytest.importorskip("torch")
    source = textwrap.dedent(_LOOP).replace("{n}", str(n))
    namespace: dict = {}
    exec(compile(source, "train.py", "exec"), namespace)
    assert namespace["windows"] == windows  # N = 2 happens to step every second micro-batch
    found = [f for f in check_text(source, "train.py", resolve()) if f.code == "LC106"]
    assert bool(found) == reported
    if reported:
        assert found[0].line == source.splitlines().index(f"        if batches_done % {n}:") + 1
