"""LBFGS: zero_grad and backward inside the closure, many evaluations per step."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)
x, y = torch.randn(32, 8), torch.randn(32, 1)


def closure():
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for i in range(4):
    optimizer.step(closure)
