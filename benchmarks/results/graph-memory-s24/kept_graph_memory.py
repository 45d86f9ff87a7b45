"""What a graph-carrying tensor kept across iterations costs, on the device and on the host.

A residual-free CNN (20 conv-BN-ReLU blocks, 62 modules) trained with SGD for N steps; each mode keeps
something different across the steps, in its own process:

- ``item``: ``running += loss.item()`` (nothing kept: the baseline);
- ``loss_after_backward``: ``running = running + loss`` after ``loss.backward()`` (LC601's bounded shape:
  backward has freed the saved activations, the graph's nodes stay);
- ``logits_after_backward``: ``kept.append(logits)`` after backward (the outputs themselves stay);
- ``no_backward``: ``running = running + loss`` of a forward that is never back-propagated (an
  evaluation pass without ``torch.no_grad()``: every step's saved activations stay).

Reported: device memory allocated (``torch.cuda.memory_allocated``) and host heap in use (glibc
``mallinfo2``) after the warm-up, then their growth per step.

    python kept_graph_memory.py cpu 8 > kept_graph_memory-cpu.out
    python kept_graph_memory.py cuda 8 64 > kept_graph_memory-cuda.out
"""
import ctypes
import subprocess
import sys

import torch
from torch import nn


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def host_bytes() -> int:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def child(mode: str, device: str, steps: int, batch: int) -> None:
    torch.manual_seed(0)
    blocks = [m for _ in range(20) for m in (nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())]
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    running, kept = 0.0, []
    warm = 10
    for step in range(steps + warm):
        if step == warm:
            if device == "cuda":
                torch.cuda.synchronize()
            dev0, host0 = (torch.cuda.memory_allocated() if device == "cuda" else 0), host_bytes()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        if mode == "no_backward":
            running = running + loss
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if mode == "item":
            running += loss.item()
        elif mode == "loss_after_backward":
            running = running + loss
        elif mode == "logits_after_backward":
            kept.append(logits)
    if device == "cuda":
        torch.cuda.synchronize()
    dev = (torch.cuda.memory_allocated() if device == "cuda" else 0) - dev0
    host = host_bytes() - host0
    print(f"{mode:22} {steps:6d} {dev / 2**20:10.1f} {dev / steps / 1024:12.1f} {host / 2**20:10.1f} "
          f"{host / steps / 1024:12.1f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 4:
        child(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        sys.exit()
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    batches = [int(b) for b in sys.argv[2:]] or [8]
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"torch {torch.__version__}, {name}; 62-module CNN, SGD, 64x64 inputs; growth after the warm-up")
    print(f"{'mode':22} {'steps':>6} {'device MiB':>10} {'device KiB/st':>12} {'host MiB':>10} {'host KiB/st':>12}")
    for batch in batches:
        print(f"batch {batch}")
        for mode in ("item", "loss_after_backward", "logits_after_backward", "no_backward"):
            steps = 20 if mode == "no_backward" else 400
            subprocess.run([sys.executable, __file__, mode, device, str(steps), str(batch)], check=True)
