"""LC205: float16 autocast with backward but no GradScaler."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for i in range(3):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    loss = nn.functional.mse_loss(out.float(), y)
    loss.backward()  # expect: LC205
    optimizer.step()
