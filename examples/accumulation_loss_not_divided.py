# expected: LC102, LC105
# Two accumulation mistakes in an otherwise ordinary loop. The per-micro-batch loss is a mean over
# its batch but is never divided by accum_steps, so every optimizer step applies the sum of 6
# gradients: the effective learning rate is 6 times what was tuned (LC102). And the step condition
# has no last-batch clause: 1000 samples in batches of 32 give 32 batches per epoch, which is not a
# multiple of 6, so the last 2 micro-batches of each epoch are never stepped and leak into the first
# window of the next epoch, which then sums 8 gradients (LC105).
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main(epochs=30, batch_size=32, accum_steps=6):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    features = torch.randn(1000, 64)
    targets = features @ torch.randn(64, 1) + 0.05 * torch.randn(1000, 1)
    loader = DataLoader(TensorDataset(features, targets), batch_size=batch_size, shuffle=True)

    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
    criterion = nn.SmoothL1Loss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.3)

    optimizer.zero_grad()
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            loss.backward()
            total += loss.item()

            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

        scheduler.step()
        print(f"epoch {epoch}: mean loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
