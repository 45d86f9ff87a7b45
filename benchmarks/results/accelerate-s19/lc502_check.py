# Two gloo processes on CPU: a forward outside `no_sync()` and only the backward inside it (Condenser's
# GradCache chunk loop) still all-reduces; the forward inside it does not.
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
from contextlib import nullcontext
from torch.nn.parallel import DistributedDataParallel as DDP

class Trainer:
    def compute_loss(self, model, x):
        return model(x).sum()

class CoTrainer(Trainer):
    def compute_loss(self, model, x):  # the subclass's own, as in Condenser
        return (model(x) ** 2).sum()

def worker(rank, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(3, 1))
    t = CoTrainer()
    x = torch.full((2, 3), float(rank + 1))
    out = {}
    for where in ("backward only", "forward and backward"):
        model.zero_grad()
        if where == "backward only":
            loss = t.compute_loss(model, x)
            with model.no_sync():
                loss.backward()
        else:
            with model.no_sync():
                loss = t.compute_loss(model, x)
                loss.backward()
        g = model.module.weight.grad.clone()
        others = [torch.zeros_like(g) for _ in range(2)]
        dist.all_gather(others, g)
        out[where] = torch.equal(others[0], others[1])
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()

if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, q)) for r in range(2)]
    [p.start() for p in ps]; print("gradients equal across ranks (all-reduced):", q.get()); [p.join() for p in ps]
