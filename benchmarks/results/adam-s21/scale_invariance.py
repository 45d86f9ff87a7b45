"""Undivided vs divided accumulated loss on a tiny model, CPU: the largest parameter difference after 12
windows of 4 micro-batches, per optimizer. Scale-invariant optimizers differ by eps alone (Adam with
eps=0: exactly 0); a clip threshold or a coupled weight decay makes them differ; SGD differs by the
N-fold step; RAdam too: its first steps (rectification term undefined) are momentum SGD."""
import torch
import torch.nn as nn


def run(make_opt, divide, clip=None, accum=4, windows=12):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    xs, ys = torch.randn(accum * windows, 8, 16, generator=g), torch.randn(accum * windows, 8, 1, generator=g)
    for i in range(accum * windows):
        loss = nn.functional.mse_loss(model(xs[i]), ys[i])
        (loss / accum if divide else loss).backward()
        if (i + 1) % accum == 0:
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            opt.zero_grad()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


cases = {
    "Adam": (lambda p: torch.optim.Adam(p, lr=1e-2), None),
    "AdamW(wd=0.05)": (lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05), None),
    "RAdam": (lambda p: torch.optim.RAdam(p, lr=1e-2), None),
    "NAdam": (lambda p: torch.optim.NAdam(p, lr=1e-2), None),
    "Adamax": (lambda p: torch.optim.Adamax(p, lr=1e-2), None),
    "Adam(wd=0.05) coupled": (lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.05), None),
    "Adam(eps=0)": (lambda p: torch.optim.Adam(p, lr=1e-2, eps=0), None),
    # a threshold between the mean's norm and the sum's: one run clips, the other does not (a threshold
    # below both clips both to the same norm and direction: no difference, 6e-8)
    "Adam + clip 1.0": (lambda p: torch.optim.Adam(p, lr=1e-2), 1.0),
    "SGD": (lambda p: torch.optim.SGD(p, lr=1e-2), None),
}
for name, (make, clip) in cases.items():
    a, b = run(make, False, clip), run(make, True, clip)
    print(f"{name:24s} max |undivided - divided| = {(a - b).abs().max().item():.2e}")
