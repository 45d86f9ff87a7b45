"""LC602 (CUDA only) for memory that rises in stairs: each epoch's validation loss is summed
with its graph (no torch.no_grad()), so allocated memory steps up once per epoch and stays."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
val_losses = []

for epoch in range(6):
    for i in range(20):
        x = torch.randn(64, 256, device="cuda")
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()  # expect: LC602
    val_loss = 0.0
    for _ in range(8):  # validation without no_grad: every batch's graph is kept
        val_loss = val_loss + model(torch.randn(512, 256, device="cuda")).pow(2).mean()
    val_losses.append(val_loss)
