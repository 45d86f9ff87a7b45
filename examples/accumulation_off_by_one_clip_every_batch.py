# expected: LC106, LC107
# The step condition uses i % accum_steps == 0, which is true on the very first micro-batch: the
# first optimizer step uses one micro-batch and every later window is shifted by one, so the windows
# do not line up with the (i + 1) % accum_steps boundary the loss division assumes (LC106). And
# clip_grad_norm_ runs after every backward pass on a partial sum of the window's gradients: the
# early micro-batches are clipped again and again while the final norm is never limited as
# intended (LC107). Fix: step on (i + 1) % accum_steps == 0 and clip once inside the step branch.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_model():
    return nn.Sequential(
        nn.Conv1d(8, 32, kernel_size=5, padding=2), nn.ReLU(),
        nn.Conv1d(32, 32, kernel_size=5, padding=2), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 3),
    )


def main(epochs=8, batch_size=24, accum_steps=4, max_grad_norm=1.0):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    signals = torch.randn(2400, 8, 128)
    labels = torch.randint(0, 3, (2400,))
    loader = DataLoader(TensorDataset(signals, labels), batch_size=batch_size, shuffle=True)

    model = make_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)

    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            loss = loss / accum_steps
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)

            if i % accum_steps == 0 or (i + 1) == len(loader):
                optimizer.step()
                optimizer.zero_grad()

        print(f"epoch {epoch}: last loss {loss.item() * accum_steps:.4f}")


if __name__ == "__main__":
    main()
