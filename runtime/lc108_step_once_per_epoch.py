"""LC108: backward on every batch but optimizer.step() only after the batch loop."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(24, 8), torch.randn(24, 1)), batch_size=4)

for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y) / len(loader)
        loss.backward()
    optimizer.step()  # expect: LC108
    optimizer.zero_grad()
