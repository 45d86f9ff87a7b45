"""LC203: the loss is scaled but optimizer.step() is called directly (and the scaler is\nnever stepped nor updated)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
scaler = torch.amp.GradScaler("cpu")

for i in range(3):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()  # expect: LC203
