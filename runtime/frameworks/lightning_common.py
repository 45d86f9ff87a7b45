"""What the Lightning scenarios share: a LightningModule over an MLP, 32 random samples in
micro-batches of 2, `Trainer(accumulate_grad_batches=4)` for one epoch on the CPU (4 optimizer
steps), a OneCycleLR stepped per optimizer step (`interval: "step"`)."""
from __future__ import annotations

import cpu_torchvision  # noqa: F401  (first: lightning imports torchvision)
import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=4)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def fit(module: pl.LightningModule, **overrides) -> pl.Trainer:
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=2)
    options = dict(accumulate_grad_batches=4, max_epochs=1, accelerator="cpu", devices=1,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False, gradient_clip_val=1.0)
    options.update(overrides)
    trainer = pl.Trainer(**options)
    trainer.fit(module, loader)
    total = sum(p.detach().abs().sum() for p in module.parameters())
    print(f"global steps {trainer.global_step} parameters {float(total):.6f}")
    return trainer
