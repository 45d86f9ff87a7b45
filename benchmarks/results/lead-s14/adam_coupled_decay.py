"""Adam with a coupled weight_decay on an accumulated loss not divided by N follows exactly the path of
Adam with weight_decay / N on the divided loss: the N-fold gradient changes only how much the decay
weighs against it (eps set tiny so that it does not blur the equality).

    python benchmarks/results/lead-s14/adam_coupled_decay.py
    raw vs mean (same wd): 0.0013498242478817701   (torch 2.13 CPU)
    raw vs mean with wd/N: 0.0
"""
import torch

def run(scale, wd):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=wd, eps=1e-12)
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        for _ in range(4):
            x = torch.randn(16, 8, generator=g); y = torch.randn(16, 1, generator=g)
            (torch.nn.functional.mse_loss(model(x), y) * scale).backward()
        opt.step(); opt.zero_grad()
    return model.weight.detach().clone()

N, wd = 4, 0.1
raw = run(1.0, wd)            # undivided: sum of N micro-batch gradients
mean_same_wd = run(1.0 / N, wd)
mean_wd_over_n = run(1.0 / N, wd / N)
print("raw vs mean (same wd):", (raw - mean_same_wd).abs().max().item())
print("raw vs mean with wd/N:", (raw - mean_wd_over_n).abs().max().item())
