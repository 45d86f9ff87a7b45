"""Accelerate with gradient_accumulation_steps=4 and `model.zero_grad()` inside
`accelerator.accumulate(model)`: Accelerate gates the prepared optimizer's `zero_grad`, not the
model's, so 3 of every 4 micro-batches are thrown away (seen in peft's examples).
framework-expect: steps 4, per-step 4
distributed-expect: steps 2, per-step 4, replicas 2, synced 2"""
import torch.nn.functional as F
from accelerate_common import report, setup

accelerator, model, optimizer, loader = setup()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for x, y in loader:
    with accelerator.accumulate(model):
        model.zero_grad()  # expect: LC101
        loss = F.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()

report(accelerator, model)
