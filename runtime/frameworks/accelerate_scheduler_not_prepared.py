"""Accelerate with gradient_accumulation_steps=4 and a scheduler left out of
`accelerator.prepare`: the optimizer step is gated to every 4th micro-batch, the scheduler's is
not, so the schedule runs 4x too fast (its cosine is over after a quarter of the run).
framework-expect: steps 4, per-step 4, scheduler CosineAnnealingLR 16"""
import torch
import torch.nn.functional as F
from accelerate_common import report, setup

accelerator, model, optimizer, loader = setup()
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for x, y in loader:
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()  # expect: LC301, LC303
        optimizer.zero_grad()

report(accelerator, model)
