"""How much host memory `running_loss += loss` (a tensor, after `loss.backward()`) keeps per step.

After backward the saved activations are freed; what the running sum keeps is each step's graph of
autograd nodes. A small residual CNN (16 conv-BN-ReLU blocks; its autograd node count is printed) on
32x32 inputs, CPU, batch 8: the process's peak RSS after 100, 400 and 1600 steps, with the running sum
kept as a tensor versus `.item()`, in separate processes.

    python benchmarks/results/skeleton-s22/running_loss_skeleton.py > benchmarks/results/skeleton-s22/running_loss_skeleton.out
"""
import resource
import subprocess
import sys

import torch


def nodes(fn) -> int:
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        todo.extend(g for g, _ in f.next_functions)
    return len(seen)


def child(kind: str, steps: int) -> None:
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

        def forward(self, x):
            return x + torch.relu(self.bn(self.conv(x)))

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), *[Block(16) for _ in range(16)],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    running = 0.0
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    for step in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if step == 0:
            print(f"nodes per step {nodes(loss.grad_fn)}", file=sys.stderr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += loss if kind == "tensor" else loss.item()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main() -> None:
    if len(sys.argv) > 1:
        return child(sys.argv[1], int(sys.argv[2]))
    print(f"torch {torch.__version__}; peak RSS in MB (16-block residual CNN, CPU, batch 8 of 32x32)")
    print("steps  item()  tensor  difference  per step")
    for steps in (100, 400, 1600):
        rss = {}
        for kind in ("item", "tensor"):
            out = subprocess.run([sys.executable, __file__, kind, str(steps)], capture_output=True, text=True)
            rss[kind] = int(out.stdout.strip()) / 1024
            note = out.stderr.strip()
        diff = rss["tensor"] - rss["item"]
        print(f"{steps:<6} {rss['item']:<7.1f} {rss['tensor']:<7.1f} {diff:<11.1f} {diff * 1024 / steps:.1f} KB", flush=True)
    print(note)


if __name__ == "__main__":
    main()
