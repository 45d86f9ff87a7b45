"""LC602 (CUDA only): every step keeps a 4 MiB device tensor in a list, so allocated memory
at step boundaries grows steadily."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(64, 64).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []

for i in range(24):
    x = torch.randn(32, 64, device="cuda")
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()  # expect: LC602
    kept.append(torch.empty(1 << 20, device="cuda"))
