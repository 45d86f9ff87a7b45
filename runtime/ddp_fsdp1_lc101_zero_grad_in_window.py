"""LC101 under FSDP1: model.zero_grad() on every micro-batch although the step comes every 4
(FSDP1 hands the optimizer a new gradient shard after each backward; a reset is still told
from accumulation). No LC501: the per-micro-batch reduce-scatter is FSDP's design.
ddp-expect: fsdp1 1"""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

cuda = torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))  # NCCL: a GPU per rank
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
torch.manual_seed(0)
model = FSDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device), device_id=device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM = 4

for i in range(4 * ACCUM):
    model.zero_grad()  # expect: LC101
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
dist.destroy_process_group()
