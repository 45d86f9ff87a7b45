"""LC101: model.zero_grad(set_to_none=False) on every micro-batch (the buffers stay, their
contents are zeroed: seen as a version jump) although the step comes every 4."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
ACCUM = 4

for i in range(12):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    model.zero_grad(set_to_none=False)  # expect: LC101
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
