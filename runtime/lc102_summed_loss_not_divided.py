"""LC102 for a summed loss: a main loss plus a weighted auxiliary loss (MoE balance loss,
regulariser, multi-task), accumulated over 4 micro-batches without dividing the sum by 4."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ACCUM = 4

for i in range(16):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    logits = model(x)
    ce = nn.functional.cross_entropy(logits, y)
    aux_loss = logits.pow(2).mean()
    loss = ce + 0.01 * aux_loss
    loss.backward()  # expect: LC102
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
