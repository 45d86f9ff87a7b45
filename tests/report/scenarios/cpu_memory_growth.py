"""Memory that grows every step (on the CPU: each step keeps a 2 MiB tensor alive in a list), the
pattern of LC602. The runtime samples the process RSS at step boundaries on the CPU; LC602 itself
is reported from CUDA allocated memory (runtime/gpu_lc602_memory_growth.py is the GPU scenario)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []

for i in range(96):
    optimizer.zero_grad()
    model(torch.randn(32, 64)).pow(2).mean().backward()
    optimizer.step()
    kept.append(torch.ones(1 << 19))  # 2 MiB, written so the pages are resident
