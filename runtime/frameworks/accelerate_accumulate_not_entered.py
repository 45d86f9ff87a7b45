"""Accelerate with gradient_accumulation_steps=4 but no `accelerator.accumulate(model)` block:
nothing gates the step, so every micro-batch steps, while `accelerator.backward` still divides
each loss by 4: every update is a quarter of what it should be.
framework-expect: steps 16, per-step 1"""
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate_common import report, setup

accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)  # expect: LC111
accelerator, model, optimizer, loader = setup(accelerator)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for x, y in loader:
    loss = F.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()

report(accelerator, model)
