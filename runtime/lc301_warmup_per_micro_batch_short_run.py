"""LC301 for a short run whose schedule ends inside the first optimizer step: a hand-written
warmup of 4 optimizer steps counted on the micro-batch counter is over after the first 4
micro-batches, and the LR is constant from the second step on. Only the first window shows the
LR changing before each of its micro-batches; the run is too short for the horizon to show."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM, STEPS, WARMUP_STEPS = 4, 4, 4

micro_step = 0
for step in range(STEPS):
    for _ in range(ACCUM):
        for group in optimizer.param_groups:
            group["lr"] = 1e-3 * min(1.0, (micro_step + 1) / WARMUP_STEPS)  # expect: LC301
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
        micro_step += 1
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
