"""A torch.compile'd model (aot_eager backend: compiled forward and backward graphs, quick
on a CPU) with correct accumulation."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 1))
compiled = torch.compile(model, backend="aot_eager")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ACCUM = 2

for i in range(8):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(compiled(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
