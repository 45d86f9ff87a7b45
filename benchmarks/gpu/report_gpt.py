"""A small GPT-style language model trained with gradient accumulation and float16 autocast +
GradScaler on CUDA, on synthetic tokens (each sequence counts upward modulo the vocabulary, so the
loss falls): the workload of the report screenshot (benchmarks/gpu/report.sh).

    python benchmarks/gpu/report_gpt.py [--pitfall none|zero-grad-in-window] [--steps 200]

``--pitfall zero-grad-in-window`` calls ``optimizer.zero_grad()`` before every micro-batch (LC101:
3 of 4 micro-batches are thrown away) and keeps every loss with its graph in a list for logging
(LC601: the graphs stay alive and memory climbs step after step)."""
from __future__ import annotations

import argparse
import math

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, Dataset


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 256, layers: int = 4, heads: int = 4, block: int = 128) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.ones(t, t, device=idx.device, dtype=torch.bool), 1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


class Counting(Dataset):
    def __init__(self, n: int, vocab: int, block: int) -> None:
        self.n, self.vocab, self.block = n, vocab, block

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = torch.randint(0, self.vocab, (1,), generator=torch.Generator().manual_seed(i))
        seq = (start + torch.arange(self.block + 1)) % self.vocab
        return seq[:-1], seq[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pitfall", choices=("none", "zero-grad-in-window"), default="none")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--device", default="cuda", help="cpu for a smoke test (float16 autocast works there too)")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = args.device
    model = GPT().to(device)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.95))
    warmup = args.steps // 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * s / args.steps)))
    if device == "cpu":
        torch.set_num_threads(1)
    scaler = torch.amp.GradScaler(device)
    loader = DataLoader(Counting(args.steps * args.accum * args.micro_batch, 512, 128), batch_size=args.micro_batch,
                        shuffle=True, num_workers=2, drop_last=True)
    kept = []
    model.train()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if args.pitfall == "zero-grad-in-window":
            optimizer.zero_grad(set_to_none=True)  # noqa: LC101 - the pitfall this run shows
        with torch.autocast(device, dtype=torch.float16):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)) / args.accum
        scaler.scale(loss).backward()
        if args.pitfall == "zero-grad-in-window":
            kept.append(loss)  # noqa: LC601 - logged later: every graph stays alive
        if (i + 1) % args.accum == 0 or i + 1 == len(loader):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            ema.update_parameters(model)
            if args.pitfall == "none":
                optimizer.zero_grad(set_to_none=True)
            step = (i + 1) // args.accum
            if step % 50 == 0:
                print(f"step {step}: loss {loss.item() * args.accum:.3f}", flush=True)


if __name__ == "__main__":
    main()
