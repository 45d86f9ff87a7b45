"""Zeroing guarded by the window start, and an inner micro-step loop (nanoGPT style) with a
summed loss normalised by the window's token count."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 5)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(12):
    if i % ACCUM == 0:
        optimizer.zero_grad()
    x, y = torch.randn(4, 8), torch.randn(4, 5)
    (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()

for step in range(3):
    batches = [(torch.randn(4, 8), torch.randint(0, 5, (4,))) for _ in range(ACCUM)]
    tokens = sum(len(y) for _, y in batches)
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(x), y, reduction="sum") / tokens
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
