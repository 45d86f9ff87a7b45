# expected: none
# Gradient accumulation done right: the loss of each micro-batch is divided by accum_steps so the
# accumulated gradient is the mean over the window, the optimizer steps on (i + 1) % accum_steps == 0
# or on the last batch of the epoch (so a partial window is never carried over), gradients are
# clipped once per window just before the step, and the scheduler, the EMA update and zero_grad all
# live inside the step branch, after optimizer.step(). The warmup/cosine horizon is counted in
# optimizer updates, the same unit the scheduler is stepped in.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset


def build_model():
    return nn.Sequential(nn.Linear(32, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 1))


def main(epochs=5, batch_size=16, accum_steps=4, lr=5e-4, warmup_updates=20):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(4000, 32)
    y = torch.sin(x[:, :1]) + 0.1 * torch.randn(4000, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)

    model = build_model().to(device)
    ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)

    updates_per_epoch = math.ceil(len(loader) / accum_steps)
    total_updates = epochs * updates_per_epoch

    def lr_lambda(update):
        if update < warmup_updates:
            return (update + 1) / warmup_updates
        progress = (update - warmup_updates) / max(1, total_updates - warmup_updates)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    optimizer.zero_grad(set_to_none=True)
    for epoch in range(epochs):
        model.train()
        epoch_loss = 0.0
        for i, (xb, yb) in enumerate(loader):
            xb, yb = xb.to(device), yb.to(device)
            loss = F.mse_loss(model(xb), yb)
            epoch_loss += loss.item()
            loss = loss / accum_steps
            loss.backward()

            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                optimizer.step()
                scheduler.step()
                ema_model.update_parameters(model)
                optimizer.zero_grad(set_to_none=True)

        print(f"epoch {epoch}: loss {epoch_loss / len(loader):.4f} lr {scheduler.get_last_lr()[0]:.2e}")

    torch.save(ema_model.module.state_dict(), "ema.pt")


if __name__ == "__main__":
    main()
