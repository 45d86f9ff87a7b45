"""LC204: scaler.unscale_() on every micro-batch: the next backward adds scaled gradients to
unscaled ones, and the second unscale_ raises.
loopcheck-exit: 1
"""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
ACCUM = 4

for i in range(8):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    scaler.scale(loss).backward()  # expect: LC204
    scaler.unscale_(optimizer)  # expect: LC204
    if (i + 1) % ACCUM == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
