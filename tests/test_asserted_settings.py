"""A setting the file asserts to be 1 (``assert args.accum == 1, "not supported yet"``) never
accumulates in a run that gets past the assert: the accumulation findings that need it above 1 are
not reported; asserted to be another value, or not asserted, they are."""

from __future__ import annotations

import pytest

from loopcheck.engine import check_source

LOOP = """
import torch


def train(args, model, loader):
    {assertion}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if (step + 1) % args.accum == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("assertion", "codes"), [
    ('assert args.accum == 1, "gradient accumulation is not supported yet"', []),
    ("assert args.accum >= 1", ["LC102", "LC105"]),
    ("if args.fp16:\n        assert args.accum == 1", ["LC102", "LC105"]),  # only the fp16 runs give it up
    ("pass", ["LC102", "LC105"]),
])
def test_a_setting_asserted_to_be_one(assertion: str, codes: list[str]) -> None:
    found = check_source(LOOP.format(assertion=assertion), filename="train.py")
    assert sorted(f.code for f in found) == codes
