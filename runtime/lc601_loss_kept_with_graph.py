"""LC601: the running loss is summed as a tensor, keeping every step's graph alive."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
running = 0.0

for i in range(8):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    running += loss  # expect: LC601
print(f"mean loss {float(running) / 8:.3f}")
