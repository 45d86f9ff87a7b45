"""LC103 in a closure: ``optimizer.step(closure)`` (LBFGS) whose closure never clears the
gradients, so every evaluation adds to the gradients of all earlier ones."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)
x, y = torch.randn(16, 8), torch.randn(16, 1)


def closure():
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()  # expect: LC103
    return loss


for step in range(4):
    optimizer.step(closure)
