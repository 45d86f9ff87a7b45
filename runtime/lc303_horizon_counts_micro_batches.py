"""LC303: OneCycleLR's total_steps counts micro-batches (epochs x batches) but it is stepped
once per optimizer step under accumulation 4: the run ends a quarter of the way through."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=4)
EPOCHS, ACCUM = 2, 4
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=EPOCHS * len(loader))

for epoch in range(EPOCHS):
    for i, (x, y) in enumerate(loader):
        (nn.functional.mse_loss(model(x), y) / ACCUM).backward()
        if (i + 1) % ACCUM == 0:
            optimizer.step()
            scheduler.step()  # expect: LC303
            optimizer.zero_grad()
