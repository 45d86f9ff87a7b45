"""LC102: the loss is divided by a running micro-batch count (1, 2, 3, 4) instead of 4."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(16):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    micro = i % ACCUM + 1
    loss = nn.functional.mse_loss(model(x), y) / micro
    loss.backward()  # expect: LC102
    if micro == ACCUM:
        optimizer.step()
        optimizer.zero_grad()
