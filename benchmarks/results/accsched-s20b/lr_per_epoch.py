"""How Accelerate steps a prepared LR scheduler that the script steps once per EPOCH (after the batch loop).

Run (CPU, gloo): `python lr_per_epoch.py` (one process) and `torchrun --nproc_per_node 2 lr_per_epoch.py`.
Each process trains a 1-weight model for EPOCHS epochs of 4 batches and steps
`CosineAnnealingLR(optimizer, T_max=EPOCHS)` once per epoch, after the batch loop, outside `accumulate()`.
Printed on rank 0, per case: how many times the wrapped scheduler was stepped and the LR (fraction of its peak)
after each epoch. Cases:

- prepared, batch loop inside `accumulate()` with N=2 (4 batches: the last one syncs)
- prepared, no `accumulate()` at all (N=1, plain loop)
- prepared, batch loop inside `accumulate()` with N=3 (4 batches: end_of_dataloader syncs the partial window)
- prepared, loop left by `break` on a non-boundary micro-batch (sync_gradients still False at the epoch step)
- prepared, `DataLoaderConfiguration(split_batches=True)`
- prepared, `Accelerator(step_scheduler_with_optimizer=False)`
- unprepared (left out of `prepare`)
- prepared, `T_max=EPOCHS * num_processes` (the horizon multiplied by the process count)
- prepared, `StepLR(step_size=2)` (milestones in epochs)
"""
import sys
import warnings

warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")

import torch
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 4
BATCHES = 4


def run(label, *, n=2, accumulate=True, prepared=True, split=False, with_optimizer=True, times_p=False,
        break_at=None, step_lr=False):
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=n,
                              dataloader_config=DataLoaderConfiguration(split_batches=split),
                              step_scheduler_with_optimizer=with_optimizer)
    P = accelerator.num_processes
    model = torch.nn.Linear(1, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    if step_lr:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    else:
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * P if times_p else EPOCHS)
    per_process = 2 * P if split else 2
    loader = DataLoader(TensorDataset(torch.ones(BATCHES * 2 * P, 1)), batch_size=per_process)
    if prepared:
        model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    else:
        model, optimizer, loader, _ = accelerator.prepare(model, optimizer, loader, scheduler)
        lr_scheduler = scheduler
    lrs, syncs = [], []
    for epoch in range(EPOCHS):
        for i, (x,) in enumerate(loader):
            if accumulate:
                with accelerator.accumulate(model):
                    accelerator.backward(model(x).sum())
                    optimizer.step()
                    optimizer.zero_grad()
            else:
                accelerator.backward(model(x).sum())
                optimizer.step()
                optimizer.zero_grad()
            if break_at is not None and i == break_at:
                break
        syncs.append(accelerator.sync_gradients)
        lr_scheduler.step()
        lrs.append(round(scheduler.get_last_lr()[0], 3))
    return (f"P={P} {label:<58} wrapped steps={scheduler.last_epoch:<2} (epochs {EPOCHS}) "
            f"sync_gradients at the epoch step={syncs} LR after each epoch={lrs}")


if __name__ == "__main__":
    import accelerate
    lines = [
        run("prepared, accumulate() N=2"),
        run("prepared, no accumulate()", n=1, accumulate=False),
        run("prepared, accumulate() N=3 (partial last window)", n=3),
        run("prepared, accumulate() N=2, break after micro-batch 0", break_at=0),
        run("prepared, split_batches=True", split=True),
        run("prepared, step_scheduler_with_optimizer=False", with_optimizer=False),
        run("unprepared", prepared=False),
        run("prepared, T_max=EPOCHS * num_processes", times_p=True),
        run("prepared, StepLR(step_size=2 epochs, gamma=0.1)", step_lr=True),
    ]
    if AcceleratorState().process_index == 0:
        print(f"accelerate {accelerate.__version__}, torch {torch.__version__}")
        print("\n".join(lines))
