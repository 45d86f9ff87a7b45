"""Adafactor ignores a constant factor on the gradient: a small MLP trained 12 windows of 4 micro-batches
with the loss undivided and divided by 4 ends with the same parameters (SGD for contrast).

    python benchmarks/results/adafactor-s30/scale_invariance.py > benchmarks/results/adafactor-s30/scale_invariance.out
(CPU, torch 2.13.0, transformers 5.24.0; "moved": how far the run took the parameters)
"""
import torch, copy
from transformers.optimization import Adafactor as HFAdafactor
torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
data = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(48)]
def run(make, divide, N=4):
    m = copy.deepcopy(base); opt = make(m.parameters())
    for i, (x, y) in enumerate(data):
        loss = torch.nn.functional.mse_loss(m(x), y)
        (loss / N if divide else loss).backward()
        if (i + 1) % N == 0:
            opt.step(); opt.zero_grad()
    return torch.cat([p.detach().flatten() for p in m.parameters()])
for name, make in [
    ("torch Adafactor wd=0.01", lambda p: torch.optim.Adafactor(p, lr=1e-2, weight_decay=0.01)),
    ("HF Adafactor fixed lr wd=0.01", lambda p: HFAdafactor(p, lr=1e-2, scale_parameter=False, relative_step=False, warmup_init=False, weight_decay=0.01)),
    ("HF Adafactor relative step", lambda p: HFAdafactor(p, lr=None)),
    ("HF Adafactor beta1=0.9", lambda p: HFAdafactor(p, lr=1e-2, scale_parameter=True, relative_step=False, beta1=0.9)),
    ("SGD", lambda p: torch.optim.SGD(p, lr=1e-2)),
]:
    a, b = run(make, False), run(make, True)
    print(f"{name}: max |undivided - divided| = {(a - b).abs().max().item():.3g}; moved {(a - run(lambda p: torch.optim.SGD(p, lr=0), True)).abs().max().item():.3g}")
