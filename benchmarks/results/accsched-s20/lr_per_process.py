"""How Accelerate steps a prepared and an unprepared LR scheduler on several processes.

Run (CPU, gloo): `torchrun --nproc_per_node 2 lr_per_process.py N` and `python lr_per_process.py N` (one
process), N the accumulation count (default 2).
Each process trains a 1-weight model for 4 optimizer steps of N micro-batches (4 * N loop iterations) with
`LinearLR(start_factor=1.0, end_factor=0.0, total_iters=HORIZON)`, the step called on every iteration inside
`accelerator.accumulate()` as the diffusers scripts do. Printed on rank 0: the LR after each optimizer step and
how many times the wrapped scheduler was stepped, for four pairings:

- prepared, horizon in optimizer steps (4)                            -> LTX-Video-Trainer's form
- prepared, horizon in optimizer steps * num_processes                -> diffusers' form
- unprepared (prepared copy discarded), horizon * num_processes       -> LongCat-Image's form
- unprepared, horizon in optimizer steps (4)
plus the first with `DataLoaderConfiguration(split_batches=True)`.
"""
import sys
import warnings

warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\(\)` before")

import torch
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset

STEPS = 4
N = int(sys.argv[1]) if len(sys.argv) > 1 else 2  # micro-batches per optimizer step


def run(prepared: bool, times_processes: bool, split: bool = False) -> str:
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    config = DataLoaderConfiguration(split_batches=split)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=N, dataloader_config=config)
    P = accelerator.num_processes
    model = torch.nn.Linear(1, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    horizon = STEPS * P if times_processes else STEPS
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=0.0, total_iters=horizon)
    # 2 samples per process and micro-batch: a global batch of 2 * P split across the processes, or
    # batches of 2 sharded across them
    loader = DataLoader(TensorDataset(torch.ones(STEPS * N * 2 * P, 1)), batch_size=2 * P if split else 2)
    if prepared:
        model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    else:
        model, optimizer, loader, _ = accelerator.prepare(model, optimizer, loader, scheduler)
        lr_scheduler = scheduler
    lrs = []
    for (x,) in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(x).sum())
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            lrs.append(round(scheduler.get_last_lr()[0], 3))
    calls = scheduler.last_epoch
    label = (f"{'prepared' if prepared else 'unprepared'}, horizon {'STEPS*P' if times_processes else 'STEPS'}"
             f"{', split_batches=True' if split else ''}")
    return (f"P={P} N={N} {label:<44} horizon={horizon:<2} scheduler steps={calls:<2} "
            f"LR after each of the {len(lrs)} optimizer steps: {lrs}")


if __name__ == "__main__":
    import accelerate
    lines = [run(True, False), run(True, True), run(False, True), run(False, False), run(True, False, split=True)]
    if AcceleratorState().process_index == 0:
        print(f"accelerate {accelerate.__version__}, torch {torch.__version__}", file=sys.stdout)
        print("\n".join(lines))
