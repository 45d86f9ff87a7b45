"""Correct DDP accumulation with torch.compile around the DDP model (Dynamo's DDP optimizer
splits the graph at bucket boundaries; the aot_eager backend needs no compiler): the first 3 of
4 micro-batches under no_sync(), more forwards than the pre-hook watches (64). No finding.
loopcheck-args: --consistency-every 4
ddp-expect: consistent, per-step 4"""
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
compiled = torch.compile(model, backend="aot_eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(20 * ACCUM):
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    last = (i + 1) % ACCUM == 0
    with contextlib.nullcontext() if last else model.no_sync():
        loss = nn.functional.mse_loss(compiled(x), y) / ACCUM
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
