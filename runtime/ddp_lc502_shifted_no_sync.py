"""LC502 under torchrun: the no_sync() condition is off by one, so the first micro-batch of
each window all-reduces and the last one does not: each rank steps with its own gradients
and the replicas diverge from the first step on.
loopcheck-args: --consistency-every 1
ddp-expect: diverged 0"""
import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

cuda = torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))  # NCCL: a GPU per rank
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device),
            device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(6 * ACCUM):
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    sync = i % ACCUM == 0  # bug: should be (i + 1) % ACCUM == 0
    with contextlib.nullcontext() if sync else model.no_sync():
        loss = nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()  # expect: LC502
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
