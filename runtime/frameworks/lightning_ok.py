"""Lightning `Trainer(accumulate_grad_batches=4, gradient_clip_val=1.0)`: Lightning divides the
loss by 4, clips and steps on every 4th micro-batch, and steps the per-step OneCycleLR with the
optimizer. 16 micro-batches: 4 optimizer steps.
The last micro-batch of each window runs inside optimizer.step(closure).
framework-expect: steps 4, per-step 4, scheduler OneCycleLR 4"""
import torch
from lightning_common import Regressor, fit

torch.manual_seed(0)
fit(Regressor())
