"""Overhead of loopcheck's runtime checker on training steps.

The same training loop runs in blocks with and without the checker (``watch()``, the session
``loopcheck run`` starts), interleaved (A B B A A B ...) so drift affects both alike; each
block starts with warm-up steps that are not timed. Step time is measured with a device
synchronisation at the end of each step (the harness's, identical in both variants); the
result is the median step time of each variant over all timed steps.

Workloads:
  gpt2  GPU-bound: a GPT-2-small-size decoder (12 layers, d=768, 12 heads, 1024 tokens),
        bf16 autocast, micro-batch 4, accumulation 4, fused AdamW, clipping, LR schedule.
  mlp   launch-bound: an 8-layer MLP (width 512, batch 64), accumulation 4, same loop.
  cpu   the mlp loop on the CPU (width 256, batch 32).

Usage: python benchmarks/runtime_overhead.py [--workloads gpt2,mlp,cpu] [--blocks 6]
       [--steps 10] [--out benchmarks/results/runtime-overhead-NAME]
Targets: <= 1% (gpt2), <= 3% (mlp).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopcheck.runtime import watch  # noqa: E402

ACCUM = 4


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int = 50304, d: int = 768, layers: int = 12, heads: int = 12,
                 context: int = 1024) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def make_workload(name: str) -> tuple:
    if name == "gpt2":
        device, model = "cuda", GPT().cuda()
        batches = [(torch.randint(0, 50304, (4, 1024), device=device),) * 2 for _ in range(ACCUM)]

        def loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            return nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    else:
        device = "cuda" if name == "mlp" else "cpu"
        width, batch = (512, 64) if name == "mlp" else (256, 32)
        layers: list[nn.Module] = []
        for _ in range(8):
            layers += [nn.Linear(width, width), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(width, 10)).to(device)
        batches = [(torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device))
                   for _ in range(ACCUM)]

        def loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(model(x), y)
    fused = device == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    def step() -> None:
        for x, y in batches:
            (loss_fn(x, y) / ACCUM).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    return device, step


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_block(device: str, step, warmup: int, steps: int, checked: bool) -> list[float]:
    times = []
    context = watch(summary=False) if checked else None
    if context is not None:
        context.__enter__()
    try:
        for i in range(warmup + steps):
            sync(device)
            start = time.perf_counter()
            step()
            sync(device)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    finally:
        if context is not None:
            context.__exit__(None, None, None)
            assert context.findings == [], context.findings  # the loop is correct
    return times


def measure(name: str, blocks: int, steps: int, warmup: int) -> dict:
    device, step = make_workload(name)
    run_block(device, step, warmup=3, steps=0, checked=False)  # lazy init, allocator warm-up
    results: dict[str, list[float]] = {"plain": [], "loopcheck": []}
    for b in range(blocks):
        order = ("plain", "loopcheck") if b % 2 == 0 else ("loopcheck", "plain")
        for variant in order:
            results[variant] += run_block(device, step, warmup, steps, variant == "loopcheck")
    plain, checked = statistics.median(results["plain"]), statistics.median(results["loopcheck"])
    return {"workload": name, "device": device, "steps_per_variant": len(results["plain"]),
            "median_step_ms_plain": round(plain * 1e3, 4),
            "median_step_ms_loopcheck": round(checked * 1e3, 4),
            "mean_step_ms_plain": round(statistics.fmean(results["plain"]) * 1e3, 4),
            "mean_step_ms_loopcheck": round(statistics.fmean(results["loopcheck"]) * 1e3, 4),
            "overhead_percent": round((checked / plain - 1) * 100, 2),
            "p10_p90_ms_plain": [round(q * 1e3, 4) for q in _deciles(results["plain"])],
            "p10_p90_ms_loopcheck": [round(q * 1e3, 4) for q in _deciles(results["loopcheck"])]}


def _deciles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[math.floor(0.1 * (len(ordered) - 1))], ordered[math.ceil(0.9 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="gpt2,mlp,cpu")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    args = parser.parse_args()
    rows = []
    for name in args.workloads.split(","):
        if name != "cpu" and not torch.cuda.is_available():
            print(f"skipping {name}: no CUDA device", file=sys.stderr)
            continue
        # the GPU-bound steps are long: more, shorter blocks interleave them more finely
        blocks, steps = (args.blocks * 2, max(args.steps // 2, 1)) if name == "gpt2" else (args.blocks, args.steps * 5)
        rows.append(measure(name, blocks, steps, args.warmup))
        print(json.dumps(rows[-1]), flush=True)
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "cpu",
            "command": "python " + " ".join(sys.argv), "blocks": args.blocks}
    if args.out:
        Path(args.out + ".json").write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
        lines = [f"# loopcheck runtime overhead on {meta['device']}", "",
                 f"torch {meta['torch']}, Python {meta['python']}; command: `{meta['command']}`", "",
                 "| workload | device | steps/variant | median step plain (ms) | with loopcheck (ms) | overhead |",
                 "|---|---|---|---|---|---|"]
        lines += [f"| {r['workload']} | {r['device']} | {r['steps_per_variant']} | {r['median_step_ms_plain']} "
                  f"| {r['median_step_ms_loopcheck']} | {r['overhead_percent']}% |" for r in rows]
        Path(args.out + ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
