# expected: none
# Mixed precision with float16 autocast, a GradScaler and two-step accumulation. The scaled loss is
# back-propagated on every micro-batch (divided by accum_steps first), and only at the window
# boundary the gradients are unscaled, clipped on their true values, stepped through
# scaler.step(optimizer) (which skips inf/NaN steps) and followed by scaler.update() and
# zero_grad. The MultiStepLR schedule is epoch-level, with milestones in epochs, and is stepped
# once after each epoch's batch loop.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SmallConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def main(epochs=12, batch_size=64, accum_steps=2):
    use_amp = torch.cuda.is_available()
    device = "cuda" if use_amp else "cpu"
    images = torch.randn(1024, 3, 32, 32)
    labels = torch.randint(0, 10, (1024,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True)

    model = SmallConvNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[6, 9], gamma=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    for epoch in range(epochs):
        model.train()
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            loss = loss / accum_steps
            scaler.scale(loss).backward()

            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)

        scheduler.step()
        print(f"epoch {epoch} done, lr {scheduler.get_last_lr()[0]:.3g}, scale {scaler.get_scale():.0f}")


if __name__ == "__main__":
    main()
