"""Count DDP all-reduces per window (gloo, CPU, 2 ranks) for where the forward runs relative to no_sync."""
import os, sys, contextlib
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

N = 4

class Trainer:
    def __init__(self, rank):
        torch.manual_seed(0)
        self.model = DDP(torch.nn.Linear(8, 1))
        self.calls = 0
        def hook(state, bucket):
            self.calls += 1
            return dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future().then(lambda f: f.value()[0])
        self.model.register_comm_hook(None, hook)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.rank = rank

    def _train_forward(self, x):
        return self.model(x).pow(2).mean()

    def _backward_loss(self, loss, sync):
        if not sync:
            with self.model.no_sync():
                (loss / N).backward()
        else:
            (loss / N).backward()

    def window(self, mode):
        self.calls = 0
        for micro in range(N):
            x = torch.randn(4, 8) + self.rank
            sync = micro == N - 1
            if mode == "helper_outside":      # LoongForge 6b3845b2~1: forward in a helper, no_sync around backward only
                loss = self._train_forward(x)
                self._backward_loss(loss, sync)
            elif mode == "direct_outside":     # forward, then `with model.no_sync(): backward()`
                loss = self.model(x).pow(2).mean()
                self._backward_loss(loss, sync)
            elif mode == "plain":              # audiolm b5ef1b6~1's transformer trainers: no sync control at all
                loss = self._train_forward(x)
                (loss / N).backward()
            elif mode == "helper_syncs":       # twin: the helper enters no_sync around its own forward
                with (contextlib.nullcontext() if sync else self.model.no_sync()):
                    loss = self._train_forward(x)
                self._backward_loss(loss, sync)
            elif mode == "helper_inside":      # the fix: the helper's forward under no_sync too
                with (contextlib.nullcontext() if sync else self.model.no_sync()):
                    loss = self._train_forward(x)
                    (loss / N).backward()
        self.opt.step(); self.opt.zero_grad()
        return self.calls

def run(rank, world, mode, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29533"))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = Trainer(rank)
    calls = t.window(mode)
    w = torch.cat([p.detach().flatten() for p in t.model.parameters()])
    ws = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(ws, w)
    if rank == 0:
        q.put((mode, calls, bool(torch.allclose(ws[0], ws[1]))))
    dist.destroy_process_group()

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    for i, mode in enumerate(["direct_outside", "helper_outside", "helper_inside", "helper_syncs", "plain"]):
        q = ctx.Queue()
        os.environ["PORT"] = str(29533 + i)
        mp.spawn(run, args=(2, mode, q), nprocs=2, join=True)
        mode, calls, same = q.get()
        print(f"{mode}: all-reduce calls in a window of {N} micro-batches = {calls}; replicas equal after step: {same}")
