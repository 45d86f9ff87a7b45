"""LC303 for a hand-written cosine decay (nanoGPT's get_lr) over the run's 24 optimizer steps,
evaluated on an iteration counter that counts micro-batches: under accumulation 4 the decay is
over after a quarter of the run, which then trains at the minimum LR."""
import math

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM, MAX_STEPS, MIN_LR = 4, 24, 1e-4
LR_DECAY_ITERS = MAX_STEPS


def get_lr(it):
    if it > LR_DECAY_ITERS:
        return MIN_LR
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * it / LR_DECAY_ITERS)) * (1e-3 - MIN_LR)


iter_num = 0
for step in range(MAX_STEPS):
    for group in optimizer.param_groups:
        group["lr"] = get_lr(iter_num)  # expect: LC303
    for micro_step in range(ACCUM):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
        iter_num += 1
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
