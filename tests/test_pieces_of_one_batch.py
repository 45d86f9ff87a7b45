"""A loop over pieces of one batch is a micro-step loop; a loop a helper feeds from the loader itself
is a loop over the data (LC108 where the step follows it)."""

from __future__ import annotations

from loopcheck.engine import check_source

_LOOP = """
import torch

import utils


def train(model, loader, optimizer, accumu_steps, rank, epochs=3):
    batches = iter(loader)
    for epoch in range(epochs):
        batch = next(batches)
        optimizer.zero_grad()
        for inputs in {pieces}:
            loss = model(**inputs).mean()
            loss.backward()
        optimizer.step()
"""


def _codes(pieces: str) -> list[str]:
    return [f.code for f in check_source(_LOOP.format(pieces=pieces), select=["LC108"])]


def test_a_helper_cutting_the_batch_is_a_micro_step_loop() -> None:
    # Nystromformer's `utils.partition_inputs(batch, accumu_steps, True)`: the pieces of the batch drawn
    assert _codes("utils.partition_inputs(batch, accumu_steps, True)") == []


def test_a_helper_handed_the_loader_goes_over_the_data() -> None:
    assert _codes("utils.shard_loader(loader, rank)") == ["LC108"]
