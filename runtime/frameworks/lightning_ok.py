"""Lightning `Trainer(accumulate_grad_batches=4, gradient_clip_val=1.0)`: Lightning divides the
loss by 4, clips and steps on every 4th micro-batch, and steps the per-step OneCycleLR with the
optimizer. 16 micro-batches: 4 optimizer steps.
framework-expect: steps 4, scheduler OneCycleLR 4
pending: per-step 4, LC102 (the backward of the last micro-batch runs inside optimizer.step(closure)
and is counted in the next window: 3 per step and an LC102 false positive; runtime-core)"""
import torch
from lightning_common import Regressor, fit

torch.manual_seed(0)
fit(Regressor())
