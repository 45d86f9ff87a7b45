"""``process_count.sharded_length``: a horizon worked out from a loader's length after ``prepare`` sharded it
counts one process's batches; before ``prepare`` (or anywhere a name is also bound before it), or next to a
count of devices, it is not read so."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loopcheck.model import build
from loopcheck.model.process_count import sharded_length
from loopcheck.model.syntax import func_name, last_part, walk

HEAD = """
import math
from accelerate import Accelerator
from transformers import get_scheduler


def main(args, model, optimizer, train_dataloader):
    accelerator = Accelerator()
"""


def _read(body: str) -> str | None:
    source = textwrap.dedent(HEAD) + textwrap.indent(textwrap.dedent(body), "    ")
    model = build(cst.parse_module(source), source)
    call = next(n for n in walk(model.module, into_functions=True)
                if isinstance(n, cst.Call) and last_part(func_name(n) or "") == "get_scheduler")
    horizon = next(a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_training_steps")
    return sharded_length(horizon, call, model)


def test_length_after_prepare_is_one_process_count() -> None:
    assert _read("""
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        steps = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps) * args.num_train_epochs
        lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
        lr_scheduler = accelerator.prepare(lr_scheduler)
    """) == "train_dataloader"


@pytest.mark.parametrize("body", [
    # taken before `prepare`: the global count (accelerate's own examples)
    """
    steps = len(train_dataloader) * args.num_train_epochs
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    """,
    # bound before `prepare` too (the diffusers scripts recompute it after)
    """
    steps = len(train_dataloader) * args.num_train_epochs
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    steps = len(train_dataloader) * args.num_train_epochs
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    """,
    # multiplied by a count of devices the file keeps itself
    """
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    steps = len(train_dataloader) * args.num_train_epochs * args.n_gpu
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    """,
    # the length of a loader that is never prepared
    """
    model, optimizer = accelerator.prepare(model, optimizer)
    steps = len(train_dataloader) * args.num_train_epochs
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    """,
    # another call in the count
    """
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    steps = estimate(len(train_dataloader)) * args.num_train_epochs
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    """,
])
def test_other_counts_are_not_read(body: str) -> None:
    assert _read(body) is None
