"""Two ranks under torchrun that each step their own optimizer with no DDP, FSDP or gradient
all-reduce: every rank trains its own replica. No LC code; the merged report says so instead of
claiming replicas that agree or an effective batch of micro-batch x world size.
ddp-expect: independent"""
import os

import torch
import torch.distributed as dist
from torch import nn

cuda = torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))
dist.init_process_group("nccl" if cuda else "gloo")
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
torch.manual_seed(dist.get_rank())
model = nn.Linear(8, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(8):
    x, y = torch.randn(4, 8, device=device), torch.randn(4, 1, device=device)
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
dist.barrier()
dist.destroy_process_group()
