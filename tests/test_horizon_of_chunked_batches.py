"""A micro-step loop over the pieces of the batch its step loop takes (a diffusion trainer's
``clean_chunks = clean.split(chunk_size)``, ``for clean_chunk, ldct_chunk in zip(clean_chunks, ...):``)
makes one optimizer step of each loader batch: a horizon that counts the loader's batches counts the
steps (no LC303); one that counts epochs does not."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import math

import torch
from transformers import get_cosine_schedule_with_warmup


def train(model, dataset, dataloader, epochs, batch_size, grad_accum):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    num_train_steps = {horizon}
    lr_scheduler = get_cosine_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=500,
                                                   num_training_steps=num_train_steps)
    for epoch in range(epochs):
        for batch in dataloader:
            clean = batch["target"]
            chunk_size = max(1, math.ceil(clean.size(0) / grad_accum))
            clean_chunks = clean.split(chunk_size)
            optimizer.zero_grad(set_to_none=True)
            for clean_chunk in clean_chunks:
                loss = model(clean_chunk).mean()
                (loss / grad_accum).backward()
            optimizer.step()
            lr_scheduler.step()
"""


@pytest.mark.parametrize(("horizon", "found"), [
    ("epochs * math.ceil(len(dataset) / batch_size)", 0),
    ("epochs * len(dataloader)", 0),
    ("epochs", 1),
])
def test_a_horizon_over_the_batches_a_chunk_loop_splits(horizon: str, found: int) -> None:
    source = textwrap.dedent(LOOP.format(horizon=horizon))
    assert len([f for f in check_text(source, "train.py", resolve()) if f.code == "LC303"]) == found
