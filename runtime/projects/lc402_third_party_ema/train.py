"""LC402 for a third-party EMA class built before training: ``ema_pytorch.EMA`` (a local
stand-in with the same module and class names) is wrapped when its module is imported, so
EMAs built before the first step are seen. One is updated after every step (fine, counted from
its first update), the other never."""
import torch
from ema_pytorch import EMA
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
ema = EMA(model)
forgotten = EMA(model)  # expect: LC402
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for i in range(6):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    ema.update()
