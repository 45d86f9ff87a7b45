"""LC502 under torchrun: no_sync() wraps only loss.backward() while the forward ran outside
it. DDP reads the flag in its forward, so every micro-batch still all-reduces (the gradients
stay correct, the no_sync() does nothing).
ddp-expect: consistent"""
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
model = DDP(nn.Linear(8, 1).to(device), device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(4 * ACCUM):
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    last = (i + 1) % ACCUM == 0
    with contextlib.nullcontext() if last else model.no_sync():
        loss.backward()  # expect: LC502
    if last:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
