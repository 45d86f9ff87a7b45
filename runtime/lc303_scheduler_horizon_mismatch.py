"""LC303: CosineAnnealingLR's T_max counts epochs, but it is stepped on every batch."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
EPOCHS, BATCHES = 2, 4
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)

for epoch in range(EPOCHS):
    for i in range(BATCHES):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        scheduler.step()  # expect: LC303
