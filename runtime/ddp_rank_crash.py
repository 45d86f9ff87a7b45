"""One rank crashes under torchrun: rank 1 raises in its fourth optimizer step, rank 0's
all-reduce then fails. Every rank that got to its exit path leaves a readable part of the
report; `loopcheck report merge` merges them afterwards and names the rank that crashed.
Run on its own (torchrun stops the other ranks when one fails).
ddp-expect: crash 1"""
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
model = DDP(nn.Linear(8, 1).to(device), device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step in range(8):
    if rank == 1 and step == 3:
        raise RuntimeError("simulated failure on rank 1 (an out-of-memory error, say)")
    x, y = torch.randn(4, 8, device=device), torch.randn(4, 1, device=device)
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
