"""LC107: gradients clipped before ``backward()``: right after ``zero_grad()`` they are None,
so the clip does nothing and clipping is silently off."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for i in range(6):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: LC107
    loss.backward()
    optimizer.step()
