"""`accelerator.accumulate()` entered twice on every micro-batch (LC106), nested and in a row, run on CPU.

Accelerator(gradient_accumulation_steps=N), a VAE and a discriminator with a prepared optimizer each, 16
micro-batches: on which micro-batches each model's block sees `sync_gradients` True (its optimizer steps
there), entered as `with accelerator.accumulate(vae), accelerator.accumulate(disc):` (nested) and as two
`with` blocks one after the other (AudioEditing's `train_vae_gan.py`), for N = 4 and N = 3.

    python benchmarks/results/accelerate-accumulate-in-a-row-s33/probe.py  # accelerate 1.15.0, torch 2.13.0 CPU
"""
import torch
from accelerate import Accelerator


def steps(n_accum: int, nested: bool) -> tuple[list[int], list[int]]:
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=n_accum)
    vae, disc = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    o1, o2 = torch.optim.SGD(vae.parameters(), lr=0.1), torch.optim.SGD(disc.parameters(), lr=0.1)
    vae, disc, o1, o2 = accelerator.prepare(vae, disc, o1, o2)
    a, b = [], []
    for i in range(16):
        x = torch.randn(4, 2)
        if nested:
            with accelerator.accumulate(vae), accelerator.accumulate(disc):
                accelerator.backward(vae(x).sum()); o1.step(); o1.zero_grad()
                if accelerator.sync_gradients: a.append(i)
                accelerator.backward(disc(x).sum()); o2.step(); o2.zero_grad()
                if accelerator.sync_gradients: b.append(i)
        else:
            with accelerator.accumulate(vae):
                accelerator.backward(vae(x).sum()); o1.step(); o1.zero_grad()
                if accelerator.sync_gradients: a.append(i)
            with accelerator.accumulate(disc):
                accelerator.backward(disc(x).sum()); o2.step(); o2.zero_grad()
                if accelerator.sync_gradients: b.append(i)
    return a, b


for n in (4, 3):
    for nested in (True, False):
        print(f"N={n} {'nested' if nested else 'in a row'}: first model syncs on", *steps(n, nested)[:1], "second on", steps(n, nested)[1])
