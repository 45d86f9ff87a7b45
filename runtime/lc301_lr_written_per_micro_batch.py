"""LC301 for a learning rate written by hand (nanoGPT/minimind style): the warmup is computed
from the micro-batch counter and written to param_groups before every micro-batch, so under
accumulation 4 the schedule advances 4 times per optimizer step."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM, WARMUP = 4, 40


def get_lr(it):
    return 1e-3 * min(1.0, (it + 1) / WARMUP)


for micro_step in range(48):
    lr = get_lr(micro_step)
    for group in optimizer.param_groups:
        group["lr"] = lr  # expect: LC301
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) / ACCUM
    loss.backward()
    if (micro_step + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
