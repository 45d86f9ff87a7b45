# expected: none
# A plain supervised loop without gradient accumulation: every batch runs one forward pass, one
# backward pass and exactly one optimizer step, gradients are cleared once per iteration before the
# backward pass, and the cosine schedule is stepped right after the optimizer with its horizon
# counted in the same unit it is stepped in (batches). Evaluation runs under torch.no_grad() and
# model.train() is restored at the start of every epoch, so nothing here should be reported.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_loaders(batch_size=64):
    x = torch.randn(2048, 20)
    y = (x[:, :5].sum(dim=1) > 0).long()
    train_set = TensorDataset(x[:1792], y[:1792])
    val_set = TensorDataset(x[1792:], y[1792:])
    return (
        DataLoader(train_set, batch_size=batch_size, shuffle=True),
        DataLoader(val_set, batch_size=256),
    )


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        correct += (model(x).argmax(dim=1) == y).sum().item()
        total += y.numel()
    return correct / total


def main(epochs=10):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_loader, val_loader = make_loaders()
    model = nn.Sequential(
        nn.Linear(20, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 2)
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=epochs * len(train_loader)
    )

    for epoch in range(epochs):
        model.train()
        running_loss = 0.0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running_loss += loss.item()
        acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: train loss {running_loss / len(train_loader):.4f}, val acc {acc:.3f}")


if __name__ == "__main__":
    main()
