# expected: LC111, LC402
# The Accelerator is configured with gradient_accumulation_steps=4, but the loop never enters
# `with accelerator.accumulate(model):`, so Accelerate never skips a step: the prepared optimizer
# steps on every batch while accelerator.backward() still divides each loss by 4, which silently
# trains with a quarter of the intended batch and learning rate (LC111). The script also builds an
# EMA copy of the model, evaluates and saves it at the end, but never updates it in the loop: the
# "EMA" checkpoint is just the randomly initialised network (LC402).
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset


def main(epochs=4, batch_size=16):
    accelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")
    x = torch.randn(3000, 48)
    y = (x[:, 0] * x[:, 1] > 0).long()
    train_loader = DataLoader(TensorDataset(x[:2500], y[:2500]), batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[2500:], y[2500:]), batch_size=128)

    model = nn.Sequential(nn.Linear(48, 256), nn.SiLU(), nn.Linear(256, 2))
    ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9999))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)
    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(train_loader))
    lr_scheduler = accelerator.prepare(lr_scheduler)

    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            loss = F.cross_entropy(model(xb), yb)
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()

        ema_model.eval()
        correct = 0
        with torch.no_grad():
            for xb, yb in val_loader:
                preds = ema_model(xb.cpu()).argmax(dim=1)
                correct += (preds == yb.cpu()).sum().item()
        accelerator.print(f"epoch {epoch}: EMA val acc {correct / 500:.3f}")

    if accelerator.is_main_process:
        torch.save(ema_model.module.state_dict(), "ema_model.pt")


if __name__ == "__main__":
    main()
