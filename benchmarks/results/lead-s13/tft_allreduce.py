"""TFT's step condition `if not N or (global_step + 1) % N == 0:` under DDP (gloo, 2 processes):
all-reduces per optimizer step, as shipped (every backward syncs) and with no_sync() on the
non-boundary micro-batches."""
import contextlib, os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP

def worker(rank, N, use_no_sync, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + N + 10 * use_no_sync))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    model = DDP(torch.nn.Linear(8, 1))
    calls = [0]
    def hook(state, bucket):
        calls[0] += 1
        return allreduce_hook(state, bucket)
    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for global_step in range(8):
        boundary = not N or (global_step + 1) % N == 0
        ctx = model.no_sync() if use_no_sync and not boundary else contextlib.nullcontext()
        with ctx:
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
        if not N or (global_step + 1) % N == 0:
            opt.step(); opt.zero_grad(); steps += 1
    if rank == 0:
        q.put((N, use_no_sync, steps, calls[0]))
    dist.destroy_process_group()

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    for N, use_no_sync in ((0, False), (4, False), (4, True)):
        q = ctx.Queue()
        mp.start_processes(worker, args=(N, use_no_sync, q), nprocs=2, start_method="spawn")
        n, s, steps, calls = q.get()
        print(f"N={n} no_sync={s}: optimizer steps {steps}, all-reduces {calls}")
