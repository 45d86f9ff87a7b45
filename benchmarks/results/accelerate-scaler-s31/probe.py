"""A GradScaler built by the script inside `accelerator.accumulate()` (LC204), run on CPU.

One weight, plain SGD with lr 1, four micro-batches per window whose loss gradients are each -0.625
(divided by 4 by Accelerate's backward): one window should move the weight by +2.5 * 0.25 = +0.625.
`per-micro-batch`: scaler.step + update inside accumulate() on every micro-batch (the flagged shape);
`sync-gated`: the same under `if accelerator.sync_gradients:` (the shape LC204 asks for).

    python benchmarks/results/accelerate-scaler-s31/probe.py
"""
import torch
from accelerate import Accelerator


def run(gated: bool) -> float:
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    w = torch.nn.Parameter(torch.zeros(()))
    optimizer = torch.optim.SGD([w], lr=1.0)
    loader = torch.utils.data.DataLoader(torch.full((4, 1), 0.625), batch_size=1)
    optimizer, loader = accelerator.prepare(optimizer, loader)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=10_000)
    for x in loader:
        with accelerator.accumulate(w):
            loss = -(w * x.sum())
            accelerator.backward(scaler.scale(loss))
            if not gated or accelerator.sync_gradients:
                scaler.step(optimizer)
                scaler.update()
            optimizer.zero_grad()
    return w.detach().item()


if __name__ == "__main__":
    print("torch", torch.__version__)
    print("expected update: +0.6250")
    print(f"per-micro-batch (LC204): {run(False):+.4f}")
    print(f"sync-gated: {run(True):+.4f}")
