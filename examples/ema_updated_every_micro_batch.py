# expected: LC303, LC401
# The step branch itself is right, but two things around it are not. The EMA of the weights is
# updated after every micro-batch instead of once per optimizer step, so with accum_steps = 8 it is
# pulled 8 times towards the same weights per step and its effective decay is 0.999 ** 8, not the
# 0.999 that was configured (LC401). And the cosine schedule's horizon T_max is
# epochs * len(loader), counted in micro-batches, while the scheduler is stepped once per optimizer
# update: by the end of training only an eighth of the cosine period has elapsed and the learning
# rate never decays (LC303).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset


class MLPMixerBlock(nn.Module):
    def __init__(self, tokens=16, dim=64):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tokens * 2), nn.GELU(), nn.Linear(tokens * 2, tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


def main(epochs=10, batch_size=32, accum_steps=8):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(4096, 16, 64)
    y = torch.randint(0, 10, (4096,))
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)

    model = nn.Sequential(MLPMixerBlock(), MLPMixerBlock(), nn.Flatten(), nn.Linear(16 * 64, 10)).to(device)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader), eta_min=1e-5)

    for epoch in range(epochs):
        model.train()
        for i, (xb, yb) in enumerate(loader):
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            loss = loss / accum_steps
            loss.backward()

            if (i + 1) % accum_steps == 0 or (i + 1) == len(loader):
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            ema.update_parameters(model)

        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.2e}")

    torch.save({"model": model.state_dict(), "ema": ema.module.state_dict()}, "mixer.pt")


if __name__ == "__main__":
    main()
