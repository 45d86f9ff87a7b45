"""LC102: accumulation over 4 micro-batches without dividing the (mean) loss by 4."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(16):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # expect: LC102
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
