"""Correct DDP accumulation under torchrun: the first 3 of 4 micro-batches run forward and
backward inside no_sync(), the last one all-reduces; a DataLoader with a DistributedSampler,
the loss divided by 4, clipping once per step. No finding, and the replicas agree.
loopcheck-args: --consistency-every 1
ddp-expect: consistent, effective-batch 32"""
import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

cuda = torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))  # NCCL: a GPU per rank
dist.init_process_group("nccl" if cuda else "gloo")
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device),
            device_ids=[device.index] if cuda else None)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, shuffle=True, seed=0))
ACCUM = 4

for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        last = (i + 1) % ACCUM == 0 or i + 1 == len(loader)
        with contextlib.nullcontext() if last else model.no_sync():
            loss = nn.functional.mse_loss(model(x), y) / ACCUM
            loss.backward()
        if last:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
dist.destroy_process_group()
