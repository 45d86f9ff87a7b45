"""LC605: model.eval() for validation at the end of each epoch, never undone."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for epoch in range(2):
    for i in range(3):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    model.eval()  # expect: LC605
    with torch.no_grad():
        model(torch.randn(4, 8))
