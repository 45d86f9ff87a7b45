"""LC101 between two backward passes that feed one step (DCGAN's discriminator): a
``netD.zero_grad()`` between ``errD_real.backward()`` and ``errD_fake.backward()`` throws the
real half's gradients away."""
import torch
from torch import nn

torch.manual_seed(0)
netG, netD = nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
bce = nn.BCELoss()

for i in range(6):
    real = torch.randn(4, 8)
    netD.zero_grad()
    errD_real = bce(netD(real), torch.ones(4, 1))
    errD_real.backward()
    fake = netG(torch.randn(4, 4))
    netD.zero_grad()  # expect: LC101
    errD_fake = bce(netD(fake.detach()), torch.zeros(4, 1))
    errD_fake.backward()
    optD.step()
    netG.zero_grad()
    errG = bce(netD(fake), torch.ones(4, 1))
    errG.backward()
    optG.step()
