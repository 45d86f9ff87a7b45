"""LC104: zero_grad() between backward and step: the step sees no gradients."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for i in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # expect: LC104
    optimizer.step()
