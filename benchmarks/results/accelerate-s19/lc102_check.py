# `accelerator.backward(loss)` around manual accumulation, 4 micro-batches per step, on CPU:
# the raw loss against the loss divided by hand, for AdamW (grouped decay, no clip) and SGD; and an
# Accelerator(gradient_accumulation_steps=4) outside accumulate(), which divides by itself.
import torch, torch.nn.functional as F
from accelerate import Accelerator

def run(opt_name, divide, ga_setting=None, N=4, steps=8):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3)
    data = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(steps)]
    params = [{"params": [model.weight], "weight_decay": 1e-4}, {"params": [model.bias], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(params, lr=1e-2, eps=1e-8) if opt_name == "adamw" else torch.optim.SGD(params, lr=1e-2)
    acc = Accelerator(cpu=True) if ga_setting is None else Accelerator(cpu=True, gradient_accumulation_steps=ga_setting)
    model, opt = acc.prepare(model, opt)
    for step, (x, y) in enumerate(data):
        loss = F.cross_entropy(model(x), y)
        acc.backward(loss / N if divide else loss)
        if (step + 1) % N == 0:
            opt.step(); opt.zero_grad()
    acc.free_memory()
    return torch.cat([p.detach().flatten() for p in model.parameters()])

for opt in ("adamw", "sgd"):
    ref = run(opt, True)
    raw = run(opt, False)
    print(opt, "raw vs /N max diff", (raw - ref).abs().max().item())
# Accelerator(gradient_accumulation_steps=4), no accumulate(): backward divides
ref = run("sgd", True)
print("sgd, GA=4 in Accelerator, raw loss, no accumulate(): max diff vs /N by hand",
      (run("sgd", False, ga_setting=4) - ref).abs().max().item())
