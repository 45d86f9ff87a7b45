"""LC601 through a GradScaler: every loss is kept in a list after its scaled backward; the list
holds the loss the user computed, whose graph node the scaler's multiplication sits on top of."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
kept = []

for i in range(8):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    kept.append(loss)  # expect: LC601
print(f"mean loss {sum(float(l) for l in kept) / len(kept):.3f}")
