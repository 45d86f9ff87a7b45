"""Count DDP all-reduces per window (gloo, CPU, 2 ranks) when a trainer's own @contextmanager sets
`require_backward_grad_sync` on its modules (speechbrain's `Brain.no_sync(use)`), entered around the
backward only (speechbrain 0b0ec9d8b..9ca48f290~) or around the forward and the backward (9ca48f290)."""
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

N = 4


class Brain:
    def __init__(self, rank):
        torch.manual_seed(0)
        self.modules = {"enc": DDP(torch.nn.Linear(8, 8)), "out": DDP(torch.nn.Linear(8, 1))}
        self.calls = 0

        def hook(state, bucket):
            self.calls += 1
            return dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future().then(
                lambda f: f.value()[0])
        for m in self.modules.values():
            m.register_comm_hook(None, hook)
        self.opt = torch.optim.SGD([p for m in self.modules.values() for p in m.parameters()], lr=0.1)
        self.rank = rank

    @contextmanager
    def no_sync(self, use=True):  # speechbrain's, shortened: the flag off on every DDP module
        if use:
            old = [m.require_backward_grad_sync for m in self.modules.values()]
            for m in self.modules.values():
                m.require_backward_grad_sync = False
            yield
            for m, value in zip(self.modules.values(), old):
                m.require_backward_grad_sync = value
        else:
            yield

    def compute_forward(self, x):
        return self.modules["out"](self.modules["enc"](x))

    def window(self, mode):
        self.calls = 0
        for micro in range(N):
            x = torch.randn(4, 8) + self.rank
            should_step = micro == N - 1
            if mode == "backward_only":  # 0b0ec9d8b core.py fit_batch
                loss = self.compute_forward(x).pow(2).mean()
                with self.no_sync(not should_step):
                    (loss / N).backward()
            else:  # "forward_and_backward": 9ca48f290
                with self.no_sync(not should_step):
                    loss = self.compute_forward(x).pow(2).mean()
                    (loss / N).backward()
        self.opt.step()
        self.opt.zero_grad()
        return self.calls


def run(rank, world, mode, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29563"))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    brain = Brain(rank)
    calls = brain.window(mode)
    w = torch.cat([p.detach().flatten() for m in brain.modules.values() for p in m.parameters()])
    ws = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(ws, w)
    if rank == 0:
        q.put((mode, calls, bool(torch.allclose(ws[0], ws[1]))))
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    for i, mode in enumerate(["backward_only", "forward_and_backward"]):
        q = ctx.Queue()
        os.environ["PORT"] = str(29563 + i)
        mp.spawn(run, args=(2, mode, q), nprocs=2, join=True)
        mode, calls, same = q.get()
        print(f"{mode}: all-reduce calls (2 DDP modules) in a window of {N} micro-batches = {calls}; "
              f"replicas equal after step: {same}")
