"""LC302: scheduler.step() before optimizer.step() in every epoch (one full-batch step each)."""
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore")  # torch's own warning is what users miss in long logs
torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)

for epoch in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    scheduler.step()  # expect: LC302
    optimizer.step()
