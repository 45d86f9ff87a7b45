"""A per-epoch LR decay computed from the micro-batch counter over an endless loader, with
passes of 5 micro-batches and windows of 4: the LR changes once inside most windows (where a
pass ends), but only at that boundary; each step uses the LR of its last micro-batch's epoch.
Not a schedule advanced per micro-batch: nothing to report."""
import itertools

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(20, 8), torch.randn(20, 1)), batch_size=4)
ACCUM, STEPS = 4, 10

for i, (x, y) in enumerate(itertools.islice(itertools.cycle(loader), ACCUM * STEPS)):
    for group in optimizer.param_groups:
        group["lr"] = 0.1 * 0.5 ** (i // len(loader))
    (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
