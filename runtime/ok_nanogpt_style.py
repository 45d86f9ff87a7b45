"""nanoGPT's loop: an inner micro-step loop with the next batch prefetched, a GradScaler that is
disabled for bfloat16, unscale_ + clip + step + update, zero_grad(set_to_none=True), a cosine
LR set by hand, and an evaluation that switches to eval() and back to train()."""
import math

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(32, 16), nn.Flatten(), nn.Linear(16 * 8, 32))
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
scaler = torch.amp.GradScaler("cpu", enabled=False)  # bfloat16: no scaling needed
ctx = torch.autocast("cpu", dtype=torch.bfloat16)
GRAD_ACCUM, MAX_ITERS, EVAL_EVERY = 4, 6, 3


def get_batch():
    x = torch.randint(0, 32, (4, 8))
    return x, x[:, 0]


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = [nn.functional.cross_entropy(model(x), y).item() for x, y in (get_batch() for _ in range(2))]
    model.train()
    return sum(losses) / len(losses)


X, Y = get_batch()
for it in range(MAX_ITERS):
    lr = 6e-4 * 0.5 * (1 + math.cos(math.pi * it / MAX_ITERS))
    for group in optimizer.param_groups:
        group["lr"] = lr
    if it % EVAL_EVERY == 0:
        estimate_loss()
    for micro_step in range(GRAD_ACCUM):
        with ctx:
            loss = nn.functional.cross_entropy(model(X), Y) / GRAD_ACCUM
        X, Y = get_batch()
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
