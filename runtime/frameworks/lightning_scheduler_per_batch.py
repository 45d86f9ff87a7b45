"""Lightning `Trainer(accumulate_grad_batches=4)` where the scheduler is stepped by hand in
`on_train_batch_end`, which runs after every micro-batch, not after every optimizer step:
the OneCycleLR built for 4 steps is over after the first window.
The last micro-batch of each window runs inside optimizer.step(closure).
framework-expect: steps 4, per-step 4"""
import torch
from lightning_common import Regressor, fit


class HandScheduledRegressor(Regressor):
    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-2)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
        return optimizer

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.schedule.step()  # expect: LC301, LC303


torch.manual_seed(0)
fit(HandScheduledRegressor())
