"""LC401: the EMA (AveragedModel) is updated on every micro-batch."""
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

torch.manual_seed(0)
model = nn.Linear(8, 1)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.99))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(12):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
    ema.update_parameters(model)  # expect: LC401
