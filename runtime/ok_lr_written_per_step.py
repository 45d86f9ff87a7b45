"""A hand-written warmup + cosine schedule evaluated once per optimizer step (nanoGPT), with
accumulation 4 and a decay horizon equal to the run: nothing to report."""
import math

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM, MAX_STEPS, WARMUP = 4, 24, 4


def get_lr(it):
    if it < WARMUP:
        return 1e-3 * (it + 1) / WARMUP
    return 1e-4 + 0.5 * (1 + math.cos(math.pi * (it - WARMUP) / (MAX_STEPS - WARMUP))) * 9e-4


for step in range(MAX_STEPS):
    lr = get_lr(step)
    for group in optimizer.param_groups:
        group["lr"] = lr
    for micro_step in range(ACCUM):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
