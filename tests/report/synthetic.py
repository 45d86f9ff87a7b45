"""A synthetic runtime report of any length (schema 2 with a ``series`` section), for the size
and speed benchmark and the downsampling tests. Its shape follows /work/SERIES.md; its numbers are
made up but shaped like a long fp16 run: 4 backward passes per step with rare 64-pass spikes, a
warm-up + cosine LR on two param groups, a loss scale that grows and halves at skipped steps, and
memory that climbs one step per "epoch" with one spike."""
from __future__ import annotations

import math
import random
from typing import Any

SPIKE_STEP = 61_234  # one window of 64 backward passes, one memory spike: they must survive downsampling


def report(steps: int = 100_000, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    backward = [4] * steps
    for i in range(0, steps, 997):
        backward[i] = 3  # the first window of each loader pass is short
    if steps > SPIKE_STEP:
        backward[SPIKE_STEP] = 64
    warmup = max(1, steps // 50)
    lr = []
    for i in range(steps):
        base = 3e-4 * (i + 1) / warmup if i < warmup else 3e-4 * 0.5 * (1 + math.cos(math.pi * i / steps))
        lr.append([base, base * 0.1])
    scale, scales, skipped = 65536.0, [], []
    for i in range(steps):
        if rng.random() < 0.0005:
            skipped.append(i)
            scale /= 2
        elif i % 2000 == 1999:
            scale *= 2
        scales.append(scale)
    epoch = max(1, steps // 10)
    memory = [2_000_000_000 + (i // epoch) * 50_000_000 + rng.randrange(0, 1_000_000) for i in range(steps)]
    if steps > SPIKE_STEP:
        memory[SPIKE_STEP] += 3_000_000_000
    ticks = {"optimizer": list(range(1, steps + 1)), "scheduler": list(range(1, steps + 1)),
             "ema": list(range(1, steps + 1)), "zero_grad": list(range(1, steps + 1))}
    histogram: dict[str, int] = {}
    for b in backward:
        histogram[str(b)] = histogram.get(str(b), 0) + 1
    return {
        "schema": "loopcheck-runtime-report/2",
        "command": ["loopcheck", "run", "--html", "run.html", "train.py", "--steps", str(steps)],
        "exit": {"how": "finished", "code": 0},
        "duration_s": 36000.0,
        "findings": [{"code": "LC306", "name": "scheduler-on-skipped-step", "severity": "warning",
                      "message": "the scheduler stepped right after a step GradScaler skipped",
                      "file": "train.py", "line": 42, "col": 9, "count": len(skipped),
                      "first_step": skipped[0] if skipped else 0, "sampled": False, "source": None}],
        "counters": {"optimizer_steps": steps - len(skipped), "skipped_steps": len(skipped),
                     "backward_passes": sum(backward), "backward_per_step": histogram,
                     "zero_grad_calls": steps, "clip_calls": steps,
                     "schedulers": [{"type": "LambdaLR", "steps": steps, "horizon": steps}],
                     "ema": [{"type": "AveragedModel", "updates": steps}],
                     "grad_scaler": {"scale": sum(backward), "unscale_": steps, "step": steps, "update": steps}},
        "memory": {"source": "cuda-allocated", "device": "cuda:0", "peak_bytes": max(memory) + 500_000_000,
                   "capacity_bytes": 85_000_000_000, "stride": 1, "per_step": []},
        "optimizers": [{"index": 0, "type": "AdamW", "params": 148, "created_at": "train.py:30", "steps": steps,
                        "skipped_steps": len(skipped), "backward_passes": sum(backward),
                        "backward_per_step": histogram, "first_lr": lr[0][0], "max_lr": 3e-4}],
        "environment": {"torch": "2.13.0", "python": "3.11.7", "platform": "linux", "device": "cuda:0",
                        "device_name": "NVIDIA H100 80GB HBM3", "cuda_available": True, "world_size": 1},
        "disabled_checks": [],
        "series": {"optimizer": 0, "step": list(range(steps)), "backward_passes": backward, "lr": lr,
                   "scale": scales, "skipped": skipped, "memory_bytes": memory, "ticks": ticks,
                   "downsampled": False},
        "distributed": {"rank": 0, "world_size": 1,
                        "effective_batch": {"micro_batch": 8, "backward_per_step": 4, "replicas": 1,
                                            "effective_batch": 32, "micro_batch_source": "DataLoader batch_size"}},
    }
