"""LC110 (opt-in): 20 micro-batches per optimizer step.
loopcheck-args: --select LC110,LC1"""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 20

for i in range(40):
    x, y = torch.randn(2, 8), torch.randn(2, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()  # expect: LC110
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
