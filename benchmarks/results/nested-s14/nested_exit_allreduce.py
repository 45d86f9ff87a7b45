"""The OC20 (equiformer) trainer shape under DDP (gloo, 2 CPU processes): the base class's `_backward`
returns early off the boundary with a nested test (`if N != 1: if self.step % N != 0: return`), the
count is global and 1-based. All-reduces and optimizer steps over 2 epochs of 8 batches, as shipped
(every backward syncs) and with the forward and backward under no_sync() off the boundary."""
import contextlib
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel


class BaseTrainer:
    def __init__(self, model, grad_accumulation_steps):
        self.model = DistributedDataParallel(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.grad_accumulation_steps = grad_accumulation_steps
        self.step = 0
        self.steps_taken = 0

    def _backward(self, loss):
        if self.grad_accumulation_steps == 1:
            self.optimizer.zero_grad()
        loss.backward()
        if self.grad_accumulation_steps != 1:
            if self.step % self.grad_accumulation_steps != 0:
                return
        self.optimizer.step()
        self.steps_taken += 1
        if self.grad_accumulation_steps != 1:
            if self.step % self.grad_accumulation_steps == 0:
                self.optimizer.zero_grad()


class Trainer(BaseTrainer):
    def train(self, batches, epochs, use_no_sync):
        for epoch in range(epochs):
            for i, x in enumerate(batches):
                self.step = epoch * len(batches) + i + 1
                boundary = self.step % self.grad_accumulation_steps == 0
                ctx = self.model.no_sync() if use_no_sync and not boundary else contextlib.nullcontext()
                with ctx:
                    loss = self.model(x).pow(2).mean() / self.grad_accumulation_steps
                    self._backward(loss)


def worker(rank, n, use_no_sync, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29611 + n + 10 * use_no_sync))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    trainer = Trainer(torch.nn.Linear(8, 1), n)
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        return allreduce_hook(state, bucket)

    trainer.model.register_comm_hook(None, hook)
    trainer.train([torch.randn(4, 8) for _ in range(8)], epochs=2, use_no_sync=use_no_sync)
    if rank == 0:
        queue.put((n, use_no_sync, trainer.steps_taken, calls[0]))
    dist.destroy_process_group()


if __name__ == "__main__":
    context = mp.get_context("spawn")
    for n, use_no_sync in ((1, False), (4, False), (4, True)):
        queue = context.Queue()
        mp.start_processes(worker, args=(n, use_no_sync, queue), nprocs=2, start_method="spawn")
        n, s, steps, calls = queue.get()
        print(f"N={n} no_sync={s}: optimizer steps {steps}, all-reduces {calls}")
