"""LC201 without LC205: float16 autocast with a GradScaler, clipping before unscale_. The scaler
is in use, so "float16 without a GradScaler" must not be reported, also after the first 16
windows (where the loss is no longer read on every backward)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")

for i in range(40):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: LC201
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
