"""Accelerate with gradient_accumulation_steps=4 and no `accelerator.accumulate(model)` block, but
the loop steps every 4 micro-batches itself: `accelerator.backward` divides each loss by 4 and the
gradients of 4 micro-batches are summed before each step. Correct accumulation: no LC111.
framework-expect: steps 4, per-step 4"""
import torch.nn.functional as F
from accelerate_common import report, setup

accelerator, model, optimizer, loader = setup()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for i, (x, y) in enumerate(loader):
    loss = F.mse_loss(model(x), y)
    accelerator.backward(loss)
    if (i + 1) % accelerator.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()

report(accelerator, model)
