"""A GAN whose discriminator loss is kept with its graph in a history list: two optimizers step
alternately, and the graphs of every iteration stay alive."""
import torch

torch.manual_seed(0)
G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
optimizer_d = torch.optim.Adam(D.parameters(), 1e-3)
optimizer_g = torch.optim.Adam(G.parameters(), 1e-3)
criterion = torch.nn.BCEWithLogitsLoss()
history = []
for i in range(20):
    D.zero_grad()
    loss_real = criterion(D(torch.randn(8, 4)), torch.ones(8, 1))
    loss_real.backward()
    fake = G(torch.randn(8, 4))
    loss_fake = criterion(D(fake.detach()), torch.zeros(8, 1))
    loss_fake.backward()
    loss_d = loss_real + loss_fake
    history.append(loss_d)  # expect: LC601
    optimizer_d.step()
    G.zero_grad()
    loss_g = criterion(D(fake), torch.ones(8, 1))
    loss_g.backward()
    optimizer_g.step()
