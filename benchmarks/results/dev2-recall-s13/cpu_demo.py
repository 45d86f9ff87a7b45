"""Tiny CPU runs of the three constructs taught in session 13 (dev2 misses), each in the shape of the
real loop, with the pitfall and with the correct form: what actually happens, not what we reason.

  python benchmarks/results/dev2-recall-s13/cpu_demo.py
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

torch.manual_seed(0)


# -- LC604, DeepKE PRGC run.py: train(model, data_iterator, ...) called once per epoch, one batch per
#    step by next(iter(data_iterator)) ---------------------------------------------------------------
def epoch_samples(restart_every_step: bool) -> int:
    data = TensorDataset(torch.arange(64).float().unsqueeze(1), torch.arange(64))
    loader = DataLoader(data, sampler=RandomSampler(data), batch_size=8)

    def train(data_iterator, seen):
        batches = iter(data_iterator)
        for step in range(len(data_iterator)):
            batch = next(iter(data_iterator)) if restart_every_step else next(batches)
            seen.update(batch[1].tolist())

    seen: set[int] = set()
    train(loader, seen)  # one epoch
    return len(seen)


print("LC604  distinct samples seen in one epoch of 64: restart every step "
      f"{epoch_samples(True)}, one iterator per epoch {epoch_samples(False)}")


# -- LC107/LC204/LC106, VL-T5 caption.py: `update` set in an if/elif/else chain, unscale_ and clip
#    before it on every micro-batch ------------------------------------------------------------------
def vlt5(N: int, fixed: bool) -> str:
    model = nn.Linear(4, 1)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    loader = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(7)]
    windows, size = [], 0
    try:
        for step_i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            size += 1
            if not fixed:
                scaler.unscale_(optim)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            update = True
            if N > 1:
                if not fixed and step_i == 0:
                    update = False
                elif (step_i + 1 if fixed else step_i) % N == 0 or step_i == len(loader) - 1:
                    update = True
                else:
                    update = False
            if update:
                if fixed:
                    scaler.unscale_(optim)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optim)
                scaler.update()
                for p in model.parameters():
                    p.grad = None
                windows.append(size)
                size = 0
    except RuntimeError as e:
        return f"RuntimeError at micro-batch {step_i}: {e}"
    return f"windows {windows}"


print(f"LC204  as written (N=2): {vlt5(2, fixed=False)}")
print(f"       unscale/clip in the step branch, 0-based `step_i` tested as-is (LC106 alone): ", end="")


def windows_only(N: int, n_batches: int) -> list[int]:
    out, size = [], 0
    for step_i in range(n_batches):
        size += 1
        update = True
        if N > 1:
            if step_i == 0:
                update = False
            elif step_i % N == 0 or step_i == n_batches - 1:
                update = True
            else:
                update = False
        if update:
            out.append(size)
            size = 0
    return out


print(f"windows {windows_only(2, 7)} (N=2, 7 batches: the first window sums 3)")
print(f"       correct form: {vlt5(2, fixed=True)}")


# -- LC102, YOLOv4-pytorch train.py: per-image mean loss, skipped when invalid by a helper, not divided
#    by accumulate, SGD ----------------------------------------------------------------------------
def yolo_update(divide: bool, accumulate: int = 2) -> float:
    torch.manual_seed(1)
    model = nn.Linear(4, 1, bias=False)
    w0 = model.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(accumulate)]

    def is_valid_number(x):
        return not (x != x or x in (float("inf"), float("-inf")) or x > 1e4)

    for i, (x, y) in enumerate(batches):
        loss = nn.functional.mse_loss(model(x), y)  # a per-sample mean, like YoloV4Loss / batch_size
        if is_valid_number(loss.item()):
            (loss / accumulate if divide else loss).backward()
        if (i + 1) % accumulate == 0:
            opt.step()
            opt.zero_grad()
    return (model.weight.detach() - w0).norm().item()


print(f"LC102  SGD update after one window of 2: not divided {yolo_update(False):.4f}, "
      f"divided {yolo_update(True):.4f} (ratio {yolo_update(False) / yolo_update(True):.2f})")
