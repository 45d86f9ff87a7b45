"""LC101: optimizer.zero_grad() on every micro-batch although the step comes every 4."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4)
ACCUM = 4

for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()  # expect: LC101
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
