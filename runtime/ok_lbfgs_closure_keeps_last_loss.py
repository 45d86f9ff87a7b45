"""An LBFGS loop that keeps losses on purpose: the loop holds the loss ``step`` returns (the
first evaluation's, which LBFGS holds during the step anyway) and the closure the latest one, to
log; neither piles up graphs, nothing is reported."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)
x, y = torch.randn(16, 8), torch.randn(16, 1)
last = {}


def closure():
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    last["loss"] = loss
    return loss


for step in range(6):
    loss = optimizer.step(closure)
    print(step, loss.item(), last["loss"].item())
