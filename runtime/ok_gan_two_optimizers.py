"""A DCGAN-style loop: two optimizers, two backward passes (real and fake halves) for D,
the G loss back-propagating through D, zero_grad on the models."""
import torch
from torch import nn

torch.manual_seed(0)
net_g = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
net_d = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()

for i in range(6):
    real = torch.randn(8, 8)
    net_d.zero_grad()
    err_real = criterion(net_d(real), torch.ones(8, 1))
    err_real.backward()
    fake = net_g(torch.randn(8, 4))
    err_fake = criterion(net_d(fake.detach()), torch.zeros(8, 1))
    err_fake.backward()
    err_d = err_real + err_fake
    opt_d.step()

    net_g.zero_grad()
    err_g = criterion(net_d(fake), torch.ones(8, 1))
    err_g.backward()
    opt_g.step()
