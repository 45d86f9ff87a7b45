"""LC207: every step overflows (a NaN in the loss), GradScaler keeps skipping and halving."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")

for i in range(12):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    x[0, 0] = float("nan")
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # expect: LC207
    scaler.update()
