"""LC305 (opt-in, selected in this folder's pyproject.toml): the LR is scaled linearly to
an effective batch of 32 x 8 = 256, 8x the reference, and used from the first step on."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.08)  # expect: LC305
loader = DataLoader(TensorDataset(torch.randn(512, 8), torch.randn(512, 1)), batch_size=32)
ACCUM = 8

for i, (x, y) in enumerate(loader):
    (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
