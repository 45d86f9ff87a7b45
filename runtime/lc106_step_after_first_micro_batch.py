"""LC106: `i % ACCUM == 0` steps after the very first micro-batch of the epoch."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(52, 8), torch.randn(52, 1)), batch_size=4)
ACCUM = 4

for i, (x, y) in enumerate(loader):
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if i % ACCUM == 0:  # expect: LC106
        optimizer.step()
        optimizer.zero_grad()
