"""What the Accelerate scenarios share: an MLP, AdamW, 32 random samples in micro-batches of 2,
an Accelerator with gradient_accumulation_steps=4 on the CPU (gloo under torchrun)."""
from __future__ import annotations

import os

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def setup(accelerator: Accelerator | None = None):
    torch.manual_seed(0)
    accelerator = accelerator or Accelerator(gradient_accumulation_steps=4, cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=2)
    return accelerator, model, optimizer, loader


def report(accelerator: Accelerator, model: torch.nn.Module) -> None:
    total = sum(p.detach().abs().sum() for p in model.parameters())
    accelerator.print(f"rank {os.environ.get('RANK', 0)} parameters {float(total):.6f}")
