"""ConvNeXt's engine.train_one_epoch with its utils.NativeScalerWithGradNormCount (the loss scaler
that owns backward, unscale_, clip and step, stepping under update_grad=) and --use_amp, tiny: a
two-layer MLP on 16 random features, 10 batches of 4 per epoch, update_freq 4, 3 epochs. On a CPU
torch 2.13 the scaler and autocast are CUDA ones and disable themselves. Two compatibility shims,
nothing else changed: torch._six (removed from torch; utils.py imports inf from it) and
torch.cuda.synchronize (called after every micro-batch; there is no CUDA here)."""
import math
import sys
import types

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.modules["torch._six"] = types.SimpleNamespace(inf=math.inf)
torch.cuda.synchronize = lambda device=None: None

import engine  # noqa: E402
import utils  # noqa: E402

UPDATE_FREQ, EPOCHS = 4, 3
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(torch.randn(40, 16), torch.randint(0, 4, (40,))), batch_size=4)
loss_scaler = utils.NativeScalerWithGradNormCount()
steps_per_epoch = len(loader) // UPDATE_FREQ
for epoch in range(EPOCHS):
    engine.train_one_epoch(model, nn.CrossEntropyLoss(), loader, optimizer, torch.device("cpu"), epoch,
                           loss_scaler, max_norm=None, start_steps=epoch * steps_per_epoch,
                           num_training_steps_per_epoch=steps_per_epoch, update_freq=UPDATE_FREQ, use_amp=True)
