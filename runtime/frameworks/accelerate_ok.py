"""Accelerate with gradient_accumulation_steps=4: the loop steps, schedules and zeroes on every
micro-batch inside `accelerator.accumulate(model)`, and Accelerate turns all but the 4th into
no-ops (and divides the loss by 4 in `accelerator.backward`). 32 samples, micro-batch 2 per
process: 4 optimizer steps on one process, 2 on each of two (the scheduler, built for 4 steps,
is stepped once per process at each step, as Accelerate does so one schedule covers the data).
framework-expect: steps 4, per-step 4, scheduler OneCycleLR 4
distributed-expect: steps 2, per-step 4, scheduler OneCycleLR 4, replicas 2, synced 2"""
import torch
import torch.nn.functional as F
from accelerate_common import report, setup

accelerator, model, optimizer, loader = setup()
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=4)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

for x, y in loader:
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(x), y)
        accelerator.backward(loss)
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()

report(accelerator, model)
