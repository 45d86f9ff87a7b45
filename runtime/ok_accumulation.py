"""Correct accumulation over 2 epochs of 10 batches with N=4: the last window of each epoch
is stepped early, the loss is divided by N, clipping, scheduler and EMA run once per step,
zero_grad comes after the step, and validation switches back to train mode."""
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.1), nn.Linear(16, 1))
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.99))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(torch.randn(40, 8), torch.randn(40, 1)), batch_size=4, shuffle=True)
ACCUM, EPOCHS = 4, 2
steps = EPOCHS * ((len(loader) + ACCUM - 1) // ACCUM)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=steps)
running = 0.0

for epoch in range(EPOCHS):
    model.train()
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
        running += loss.item()
        if (i + 1) % ACCUM == 0 or (i + 1) == len(loader):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            ema.update_parameters(model)
    model.eval()
    with torch.no_grad():
        val = nn.functional.mse_loss(model(torch.randn(8, 8)), torch.randn(8, 1))
