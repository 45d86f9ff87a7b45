"""A conditional no_sync whose sync side is the step's own periodic test, with a 0-based step
(`no_sync if step % N != 0`, step under `step % N == 0 and step != 0`, SAM-Med3D's train.py), and
the inverted one (`no_sync if step % N == 0`), under DDP with gloo on 2 CPU processes. Prints, for
each optimizer step, whether both ranks stepped with the same gradient.

    python benchmarks/results/lead-s14/no_sync_step_phase.py
    sync side = step's test -> ranks agree at each step: [True, True, True]     (torch 2.13 CPU)
    inverted -> ranks agree at each step: [False, False, False]
"""
import contextlib
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

N, MICRO = 4, 13


def run(rank: int, inverted: bool, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533" if inverted else "29532")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    g = torch.Generator().manual_seed(rank)
    same = []
    for step in range(MICRO):
        off = step % N == 0 if inverted else step % N != 0
        context = model.no_sync if off else contextlib.nullcontext
        with context():
            (model(torch.randn(8, 4, generator=g)).pow(2).mean() / N).backward()
        if step % N == 0 and step != 0:
            grads = model.module.weight.grad.clone()
            gathered = [torch.zeros_like(grads) for _ in range(2)]
            dist.all_gather(gathered, grads)
            same.append(bool(torch.equal(gathered[0], gathered[1])))
            model.zero_grad()
    if rank == 0:
        out.put((inverted, same))
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    for inverted in (False, True):
        q = ctx.Queue()
        ctx.Process(target=run, args=(1, inverted, q)).start()
        run_p = ctx.Process(target=run, args=(0, inverted, q))
        run_p.start()
        print("inverted" if inverted else "sync side = step's test", "-> ranks agree at each step:", q.get()[1])
