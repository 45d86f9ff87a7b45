"""LC501 under torchrun: DDP with accumulation over 4 micro-batches and no no_sync(): every
micro-batch all-reduces, 3 redundant all-reduces per optimizer step. The result is still
correct: the replicas stay identical.
loopcheck-args: --consistency-every 4
ddp-expect: consistent, effective-batch 32"""
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

for i in range(24 * ACCUM):  # past the forwards the pre-hook watches (64)
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()  # expect: LC501
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
