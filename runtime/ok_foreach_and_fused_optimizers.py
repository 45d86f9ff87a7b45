"""Correct accumulation with a foreach Adam and a fused AdamW (two parameter sets)."""
import torch
from torch import nn

torch.manual_seed(0)
body, head = nn.Linear(8, 16), nn.Linear(16, 1)
opt_body = torch.optim.Adam(body.parameters(), lr=1e-3, foreach=True)
opt_head = torch.optim.AdamW(head.parameters(), lr=1e-3, fused=True)
ACCUM = 4

for i in range(16):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(head(torch.relu(body(x))), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        opt_body.step()
        opt_head.step()
        opt_body.zero_grad(set_to_none=False)
        opt_head.zero_grad()
