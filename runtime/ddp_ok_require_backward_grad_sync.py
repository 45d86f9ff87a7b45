"""Correct DDP accumulation in nanoGPT's style under torchrun: instead of no_sync(), the loop
sets model.require_backward_grad_sync before each forward, True only on the last micro-batch.
loopcheck-args: --consistency-every 1
ddp-expect: consistent"""
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
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(device),
            device_ids=[device.index] if cuda else None)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM = 4

for step in range(6):
    for micro_step in range(ACCUM):
        model.require_backward_grad_sync = micro_step == ACCUM - 1
        x, y = torch.randn(4, 8, device=device) + rank, torch.randint(0, 4, (4,), device=device)
        loss = nn.functional.cross_entropy(model(x), y) / ACCUM
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
dist.destroy_process_group()
