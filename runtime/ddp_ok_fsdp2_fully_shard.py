"""FSDP2 (fully_shard) under torchrun with accumulation over 4 micro-batches and no
set_requires_gradient_sync(False): FSDP reduce-scatters on every micro-batch by design, which
is not LC501 (that code is about DDP's all-reduce). The loop is correct: no finding, and the
ranks agree on the step count. (FSDP gradients are sharded: no cross-rank checksum.)
ddp-expect: fsdp2 3, per-step 4"""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

cuda = torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))  # NCCL: a GPU per rank
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM = 4

for i in range(4 * ACCUM):
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
