"""Two backward passes on two losses of one forward (retain_graph) before one step, a
gradient penalty through torch.autograd.grad, and reentrant activation checkpointing."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for i in range(4):
    x = torch.randn(4, 8, requires_grad=True)
    optimizer.zero_grad()
    out = checkpoint(model, x, use_reentrant=True)
    out[:, 0].mean().backward(retain_graph=True)
    out[:, 1].pow(2).mean().backward()
    grad_x, = torch.autograd.grad(model(x).sum(), x, create_graph=True)
    grad_x.pow(2).mean().backward()
    optimizer.step()
