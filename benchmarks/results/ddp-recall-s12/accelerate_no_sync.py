"""Count DDP all-reduces per window (Accelerate 1.15, CPU, gloo, 2 ranks) for `accelerator.no_sync(model)`
entered around the backward only (the forward ran before it) and around the forward and the backward."""
import os

import torch
import torch.multiprocessing as mp

N = 4


def run(rank, world, mode, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    from accelerate import Accelerator
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        fut = torch.distributed.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    model.register_comm_hook(None, hook)
    for micro in range(N):
        x = torch.randn(4, 8) + rank
        last = micro == N - 1
        if mode == "backward_only":
            loss = model(x).pow(2).mean() / N
            if last:
                accelerator.backward(loss)
            else:
                with accelerator.no_sync(model):
                    accelerator.backward(loss)
        else:
            if last:
                accelerator.backward(model(x).pow(2).mean() / N)
            else:
                with accelerator.no_sync(model):
                    accelerator.backward(model(x).pow(2).mean() / N)
    optimizer.step()
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    ws = [torch.zeros_like(w) for _ in range(world)]
    torch.distributed.all_gather(ws, w)
    if rank == 0:
        q.put((mode, type(model).__name__, calls[0], bool(torch.allclose(ws[0], ws[1]))))
    accelerator.end_training()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    for i, mode in enumerate(["backward_only", "forward_and_backward"]):
        q = ctx.Queue()
        os.environ["PORT"] = str(29573 + i)
        mp.spawn(run, args=(2, mode, q), nprocs=2, join=True)
        mode, kind, calls, same = q.get()
        print(f"{mode}: prepared model is {kind}; all-reduce calls in a window of {N} micro-batches = {calls}; "
              f"replicas equal after step: {same}")
