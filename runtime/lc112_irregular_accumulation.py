"""LC112: the step condition yields windows of 4, 2, 4, 2, ... micro-batches."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4
STEP_AT = {3, 5, 9, 11, 15, 17, 21}

for i in range(22):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()  # expect: LC112
    if i in STEP_AT:
        optimizer.step()
        optimizer.zero_grad()
