# expected: none
# A DCGAN-style loop with two networks and two optimizers in one iteration. The discriminator's
# gradients are cleared, two backward passes (real and detached fake batch) add up into them and
# optD steps once; then the generator's gradients are cleared, one backward pass runs through the
# discriminator and optG steps once. Each optimizer is zeroed and stepped exactly once per
# iteration, which is correct even though there are three backward calls.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

LATENT = 64


def make_generator():
    return nn.Sequential(
        nn.Linear(LATENT, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh()
    )


def make_discriminator():
    return nn.Sequential(
        nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1)
    )


def main(epochs=20, batch_size=128):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    real_images = torch.rand(6000, 784) * 2 - 1
    loader = DataLoader(TensorDataset(real_images), batch_size=batch_size, shuffle=True, drop_last=True)

    netG = make_generator().to(device)
    netD = make_discriminator().to(device)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    fixed_noise = torch.randn(16, LATENT, device=device)

    for epoch in range(epochs):
        for i, (real,) in enumerate(loader):
            real = real.to(device)
            ones = torch.ones(real.size(0), 1, device=device)
            zeros = torch.zeros(real.size(0), 1, device=device)

            # (1) update D: maximise log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            errD_real = criterion(netD(real), ones)
            errD_real.backward()
            noise = torch.randn(real.size(0), LATENT, device=device)
            fake = netG(noise)
            errD_fake = criterion(netD(fake.detach()), zeros)
            errD_fake.backward()
            optD.step()

            # (2) update G: maximise log(D(G(z)))
            netG.zero_grad()
            errG = criterion(netD(fake), ones)
            errG.backward()
            optG.step()

            if i % 20 == 0:
                print(f"[{epoch}/{epochs}][{i}/{len(loader)}] "
                      f"loss_D {(errD_real + errD_fake).item():.3f} loss_G {errG.item():.3f}")

        with torch.no_grad():
            samples = netG(fixed_noise).cpu()
        torch.save(samples, f"samples_epoch{epoch:03d}.pt")


if __name__ == "__main__":
    main()
