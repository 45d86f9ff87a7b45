"""LC104 in a closure: ``optimizer.step(closure)`` (LBFGS) whose closure clears the gradients
after its backward pass instead of before it: every evaluation hands the optimizer cleared
gradients, so LBFGS sees a zero gradient and stops without moving the parameters."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)
x, y = torch.randn(16, 8), torch.randn(16, 1)


def closure():
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # expect: LC104
    return loss


for step in range(4):
    optimizer.step(closure)
