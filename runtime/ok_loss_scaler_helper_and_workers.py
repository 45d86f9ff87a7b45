"""An MAE/DeiT-style NativeScaler helper that owns backward, unscale_, clipping, step and update
(with update_grad on the window's last micro-batch), fed by a DataLoader with worker processes."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu")

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, update_grad=True):
        self._scaler.scale(loss).backward()
        if update_grad:
            self._scaler.unscale_(optimizer)
            if clip_grad is not None:
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            self._scaler.step(optimizer)
            self._scaler.update()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_scaler = NativeScaler()
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4, num_workers=2)
    ACCUM = 2
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y) / ACCUM
            loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters(),
                        update_grad=(i + 1) % ACCUM == 0)
            if (i + 1) % ACCUM == 0:
                optimizer.zero_grad()
