"""LC105: 10 batches per epoch, accumulation 4: the last 2 micro-batches of epoch 1 are
never stepped and leak into epoch 2's first step."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(40, 8), torch.randn(40, 1)), batch_size=4)
ACCUM = 4

for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
        if (i + 1) % ACCUM == 0:  # expect: LC105
            optimizer.step()
            optimizer.zero_grad()
