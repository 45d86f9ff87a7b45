"""LC503 under torchrun: a CNN with BatchNorm2d (not SyncBatchNorm) under DDP over 2 ranks,
each normalising over its own micro-batch of 4 images.
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
net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(8, 10)).to(device)
model = DDP(net, device_ids=[device.index] if cuda else None)  # expect: LC503
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for i in range(6):
    x, y = torch.randn(4, 3, 8, 8, device=device) + rank, torch.randint(0, 10, (4,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
