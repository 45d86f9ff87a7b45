"""A learning rate scaled by the micro-batch size alone and a loss summed undivided over the window
are the linear-scaling rule for the effective batch (Detectron.pytorch's ``iter_size``: "gradients
are accumulated, so lr is scaled based on batch_size instead of effective_batch_size"): an SGD step
is ``lr * b / 256`` times a sum of N means, i.e. ``lr * N * b / 256`` times the window's mean. Neither
LC102 nor LC304 is reported there; each is where only one of the two leaves N out."""

from __future__ import annotations

import pytest

from loopcheck.engine import check_source

LOOP = """
import torch
{lr}
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for i, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x), y){divided}
    loss.backward()
    if (i + 1) % args.accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
MICRO = "args.lr = args.base_lr * args.batch_size / 256"
DETECTRON = "cfg.SOLVER.BASE_LR *= args.batch_size / original_batch_size\nargs.lr = cfg.SOLVER.BASE_LR"
EFFECTIVE = "total_batch_size = args.batch_size * args.accum_steps\nargs.lr = args.base_lr * total_batch_size / 256"


@pytest.mark.parametrize(("lr", "divided", "codes"), [
    (MICRO, "", []),
    (DETECTRON, "", []),
    (EFFECTIVE, "", ["LC102"]),
    (MICRO, " / args.accum_steps", ["LC304"]),
    (EFFECTIVE, " / args.accum_steps", []),
])
def test_the_rate_and_the_loss_each_leave_n_out_or_not(lr: str, divided: str, codes: list[str]) -> None:
    found = check_source(LOOP.format(lr=lr, divided=divided), select=["LC102", "LC304"])
    assert sorted(f.code for f in found) == codes
