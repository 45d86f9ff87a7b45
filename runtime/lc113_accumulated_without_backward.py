"""LC113: micro-batch losses are collected but never back-propagated before the step."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4
losses = []

for i in range(12):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    losses.append(nn.functional.mse_loss(model(x), y) / ACCUM)
    if (i + 1) % ACCUM == 0:
        optimizer.step()  # expect: LC113
        optimizer.zero_grad()
        losses.clear()
