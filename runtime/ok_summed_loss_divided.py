"""A summed loss divided correctly under accumulation 4, in the three usual spellings: the sum
divided, each term divided, and a sum-reduced auxiliary term next to the divided main loss."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(48):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    logits = model(x)
    ce = nn.functional.cross_entropy(logits, y)
    if i < 16:
        loss = (ce + 0.01 * logits.pow(2).mean()) / ACCUM
    elif i < 32:
        loss = ce / ACCUM + 0.01 * logits.pow(2).mean() / ACCUM
    else:
        loss = ce / ACCUM + 1e-4 * logits.pow(2).sum()
    loss.backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
