"""LC501 with torch.compile around the DDP model (aot_eager backend): accumulation over 4
micro-batches and no no_sync(), so every micro-batch all-reduces; more forwards than the
pre-hook watches (64), so the later ones are read from DDP's own flag.
ddp-expect: per-step 4"""
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
model = torch.compile(DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device),
                          device_ids=[device.index] if cuda else None), backend="aot_eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(20 * ACCUM):
    x, y = torch.randn(4, 8, device=device) + rank, torch.randn(4, 1, device=device)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()  # expect: LC501
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
