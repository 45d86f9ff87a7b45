"""`accelerator.accumulate()` entered twice on every micro-batch (LC106), run on CPU.

Accelerator(gradient_accumulation_steps=4), an actor and a critic, 16 micro-batches: how many of them
see `sync_gradients` True (the prepared optimizers step on those), entered as
`with accelerator.accumulate(actor), accelerator.accumulate(critic):` and as one
`with accelerator.accumulate(actor, critic):`.

    python benchmarks/results/accelerate-accumulate-twice-s31/probe.py
"""
import torch
from accelerate import Accelerator


def synced(twice: bool) -> list[int]:
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    actor, critic = accelerator.prepare(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    steps = []
    for i in range(16):
        if twice:
            with accelerator.accumulate(actor), accelerator.accumulate(critic):
                if accelerator.sync_gradients:
                    steps.append(i)
        else:
            with accelerator.accumulate(actor, critic):
                if accelerator.sync_gradients:
                    steps.append(i)
    return steps


if __name__ == "__main__":
    print("micro-batches that step, entered twice (LC106):", synced(True))
    print("micro-batches that step, entered once:", synced(False))
