"""A DataLoader built from a batch_sampler (its micro-batch is the sampler's batch_size) and a
GradScaler(enabled=False) (bfloat16 needs no scaling): the report names the micro-batch and
says the scaler was disabled."""
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", enabled=False)
data = TensorDataset(torch.randn(48, 8), torch.randn(48, 1))
loader = DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data), batch_size=6, drop_last=True))
ACCUM = 2

for i, (x, y) in enumerate(loader):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).float(), y) / ACCUM
    scaler.scale(loss).backward()
    if (i + 1) % ACCUM == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
