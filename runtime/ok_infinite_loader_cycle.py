"""An infinite loader (denoising-diffusion-pytorch's Trainer): ``cycle(dl)`` re-iterates the
DataLoader forever and every window has exactly 4 micro-batches, so some windows span the end
of one loader pass and the start of the next. That is correct: nothing leaked."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def cycle(dl):
    while True:
        for data in dl:
            yield data


torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dl = cycle(DataLoader(TensorDataset(torch.randn(40, 8), torch.randn(40, 1)), batch_size=4))
ACCUM = 4

for step in range(8):
    for _ in range(ACCUM):
        x, y = next(dl)
        loss = nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
