"""Accumulation over 4 micro-batches whose last one runs in the closure passed to
optimizer.step(), as Lightning's automatic optimization does under accumulate_grad_batches: the
closure adds to the window's earlier micro-batches on purpose and the loss is divided by 4."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1)),
                                     batch_size=4)


def micro_batch(x, y):
    loss = nn.functional.mse_loss(model(x), y) / 4
    loss.backward()
    return loss


for i, (x, y) in enumerate(loader):
    if (i + 1) % 4:
        micro_batch(x, y)
    else:
        optimizer.step(lambda: micro_batch(x, y))
        optimizer.zero_grad()
