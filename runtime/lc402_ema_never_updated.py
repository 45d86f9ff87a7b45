"""LC402: an EMA model is created and evaluated but never updated."""
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

torch.manual_seed(0)
model = nn.Linear(8, 1)
ema = AveragedModel(model)  # expect: LC402
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for i in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

with torch.no_grad():
    ema(torch.randn(4, 8))
