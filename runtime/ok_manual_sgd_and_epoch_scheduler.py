"""Manual SGD without an optimizer, then an epoch-level scheduler stepped once per epoch with
a no_grad evaluation and model.train() at the start of each epoch."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
for i in range(3):
    loss = nn.functional.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 1))
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
            p.grad = None

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
for epoch in range(3):
    model.train()
    for i in range(3):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 1)).backward()
        optimizer.step()
    scheduler.step()
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 8))
