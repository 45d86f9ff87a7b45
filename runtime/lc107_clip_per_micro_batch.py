"""LC107: clip_grad_norm_ on every micro-batch: it clips partial sums."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(12):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: LC107
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
