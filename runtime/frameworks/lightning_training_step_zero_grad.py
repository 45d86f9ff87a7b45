"""Lightning `Trainer(accumulate_grad_batches=4)` with a `training_step` that zeroes the
optimizer's gradients on every batch (a habit carried over from hand-written loops):
Lightning accumulates 4 micro-batches per step, but only the last one survives.
The last micro-batch of each window runs inside optimizer.step(closure).
framework-expect: steps 4, per-step 4"""
import torch
import torch.nn.functional as F
from lightning_common import Regressor, fit


class ZeroingRegressor(Regressor):
    def training_step(self, batch, batch_idx):
        self.optimizers().zero_grad()  # expect: LC101
        x, y = batch
        return F.mse_loss(self.net(x), y)


torch.manual_seed(0)
fit(ZeroingRegressor())
