"""LC102 over a longer run: after the first 16 windows only one window in 8 has its loss read,
so the finding's count is a sample of the windows (the report and the summary say so), not the
number of steps affected (all 40 are)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
ACCUM = 4

for i in range(40 * ACCUM):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()  # expect: LC102
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
