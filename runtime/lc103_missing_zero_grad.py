"""LC103: the gradients are never cleared, so every step adds all earlier gradients."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for i in range(6):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()  # expect: LC103
