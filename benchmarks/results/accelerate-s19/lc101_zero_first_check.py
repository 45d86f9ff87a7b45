"""LC101 on a prepared optimizer zeroed at the top of accumulate() (CPU, accelerate): the gradient
each step sees, zeroing inside the block before the backward against zeroing before the block.

    python benchmarks/results/accelerate-s19/lc101_zero_first_check.py   (needs accelerate)
"""
import torch
from accelerate import Accelerator


def steps_see(zero_inside: bool) -> list[float]:
    accelerator = Accelerator(gradient_accumulation_steps=2, cpu=True)
    w = torch.nn.Parameter(torch.zeros(()))
    optimizer = accelerator.prepare(torch.optim.SGD([w], lr=0.0))
    seen: list[float] = []
    optimizer.optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(w.grad.item()))
    for x in [1.0, 10.0, 1.0, 10.0]:  # d(w * x) / dw = x: a window sums to 11, divided by N = 2
        if not zero_inside:
            optimizer.zero_grad()
        with accelerator.accumulate(w):
            if zero_inside:
                optimizer.zero_grad()
            accelerator.backward(w * x)
            optimizer.step()
    return seen


print("zeroed inside accumulate(), before the backward:", steps_see(True))
print("zeroed before accumulate():                    ", steps_see(False))
