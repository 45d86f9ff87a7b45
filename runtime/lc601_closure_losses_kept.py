"""LC601 in a closure: each evaluation's loss is appended to a list with its graph. LBFGS
evaluates the closure several times per step, so the graphs pile up within two steps (the
time_sequence_prediction example with the list added)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)
x, y = torch.randn(16, 8), torch.randn(16, 1)
losses = []


def closure():
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    losses.append(loss)  # expect: LC601
    return loss


for step in range(3):
    optimizer.step(closure)
print(f"{len(losses)} closure evaluations")
