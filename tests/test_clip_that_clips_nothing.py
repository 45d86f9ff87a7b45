"""A clip whose threshold the file pins at 1e9 or more, or at infinity, never binds: the "no
clipping" spelling of RSNA 2024's scripts (``MAX_GRAD_NORM = None``, then ``clip_grad_norm_(params,
MAX_GRAD_NORM or 1e9)``) clips neither a partial window (LC107) nor scaled gradients (LC201)."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import math

import torch

MAX_GRAD_NORM = {value}
GRAD_ACC = int(input())


def train(model, loader, optimizer, scaler):
    for idx, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y) / GRAD_ACC
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), {threshold})
        if (idx + 1) % GRAD_ACC == 0 or idx + 1 == len(loader):
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("value", "threshold", "codes"), [
    ("None", "MAX_GRAD_NORM or 1e9", []),
    ("None", "max_norm=MAX_GRAD_NORM or 1e9", []),
    ("None", "float('inf')", []),
    ("None", "math.inf", []),
    ("1e10", "MAX_GRAD_NORM", []),
    # a threshold that binds
    ("1.0", "MAX_GRAD_NORM or 1e9", ["LC107", "LC201"]),
    ("None", "1000", ["LC107", "LC201"]),
    ("None", "MAX_GRAD_NORM or 5.0", ["LC107", "LC201"]),
])
def test_a_threshold_no_gradient_reaches(value: str, threshold: str, codes: list[str]) -> None:
    source = textwrap.dedent(LOOP.format(value=value, threshold=threshold))
    assert sorted({f.code for f in check_text(source, "train.py", resolve())} - {"LC206"}) == codes
