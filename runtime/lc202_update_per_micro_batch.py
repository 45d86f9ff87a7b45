"""LC202: scaler.update() on every micro-batch: the first one has no step to update after
(torch fails an assertion there).
loopcheck-exit: 1
"""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
ACCUM = 2

for i in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    scaler.scale(loss).backward()
    if (i + 1) % ACCUM == 0:
        scaler.step(optimizer)
        optimizer.zero_grad()
    scaler.update()  # expect: LC202
