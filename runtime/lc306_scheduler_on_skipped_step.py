"""LC306: GradScaler skips the first step (overflow) and the scheduler advances anyway."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 0.1, 1.0, total_iters=5)

for i in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    if i == 0:
        x[0, 0] = float("inf")
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()  # expect: LC306
