"""The LR follows the linear rule (0.1 at 256 -> 0.05 at 32 x 4 = 128) after a short warmup."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=2)
loader = DataLoader(TensorDataset(torch.randn(512, 8), torch.randn(512, 1)), batch_size=32)
ACCUM = 4

for i, (x, y) in enumerate(loader):
    (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        warmup.step()
        optimizer.zero_grad()
