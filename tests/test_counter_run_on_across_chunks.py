"""A step counter set before each pass to the batches of the passes before it runs on across them:
Amber's ``step = chunk_idx * (len(examples) // per_device_batch_size)`` in ``train_chunk``, called
once per chunk of a chunk loop, its batches ``tqdm.trange(0, len(examples), per_device_batch_size)``.
A window that spans two chunks still holds N micro-batches: no partial window is carried (LC105). A
counter set to 0 before each pass restarts and carries the tail."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

CHUNKS = """
import torch
import tqdm


def train_chunk(model, optimizer, examples, per_device_batch_size, accumulate_grad_batches, chunk_idx):
    step = {start}
    example_batch_idxes = tqdm.trange(0, len(examples), per_device_batch_size)
    for i in example_batch_idxes:
        step += 1
        is_accumulating = (step % accumulate_grad_batches != 0)
        loss = model(examples[i:i + per_device_batch_size]).mean()
        (loss / accumulate_grad_batches).backward()
        if not is_accumulating:
            optimizer.step()
            optimizer.zero_grad()


def main(model, per_device_batch_size=2, accumulate_grad_batches=4):
    optimizer = torch.optim.AdamW(model.parameters())
    for chunk_idx in range(N_CHUNKS):
        examples = load_jsonl_examples(chunk_idx)
        train_chunk(model=model, optimizer=optimizer, examples=examples, per_device_batch_size=per_device_batch_size,
                    accumulate_grad_batches=accumulate_grad_batches, chunk_idx=chunk_idx)
"""


@pytest.mark.parametrize(("start", "codes"), [
    ("chunk_idx * (len(examples) // per_device_batch_size)", []),
    ("0", ["LC105"]),
    # batches of another size than the range's: not the count of the earlier passes' batches
    ("chunk_idx * (len(examples) // accumulate_grad_batches)", ["LC105"]),
])
def test_a_counter_set_to_the_batches_of_earlier_chunks(start: str, codes: list[str]) -> None:
    found = check_text(textwrap.dedent(CHUNKS.format(start=start)), "train.py", resolve())
    assert sorted(f.code for f in found if f.code != "LC206") == codes
