# expected: none
# A nanoGPT-style loop: each optimizer iteration runs an inner loop of grad_accum micro-steps, each
# with its loss divided by grad_accum and back-propagated through the GradScaler; under DDP only the
# last micro-step all-reduces (require_backward_grad_sync is set from micro_step == grad_accum - 1).
# After the inner loop the gradients are unscaled, clipped, stepped once and cleared with
# set_to_none. The learning rate is set by hand per iteration from a warmup/cosine function.
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, BLOCK = 512, 64


class TinyLM(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(BLOCK, d)
        layer = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, idx, targets):
        t = idx.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        logits = self.head(self.ln(self.blocks(h, mask=mask, is_causal=True)))
        return logits, F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def get_batch(data, batch_size, device):
    ix = torch.randint(len(data) - BLOCK - 1, (batch_size,))
    x = torch.stack([data[i:i + BLOCK] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + BLOCK] for i in ix])
    return x.to(device), y.to(device)


def lr_at(it, max_lr=6e-4, min_lr=6e-5, warmup_iters=100, decay_iters=2000):
    if it < warmup_iters:
        return max_lr * (it + 1) / warmup_iters
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


def main(max_iters=2000, batch_size=12, grad_accum=8, grad_clip=1.0):
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        torch.distributed.init_process_group(backend="nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    else:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    use_fp16 = device.startswith("cuda")

    data = torch.randint(0, VOCAB, (200_000,))
    model = TinyLM().to(device)
    if ddp:
        model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=use_fp16)

    x, y = get_batch(data, batch_size, device)
    for it in range(max_iters):
        lr = lr_at(it)
        for group in optimizer.param_groups:
            group["lr"] = lr

        for micro_step in range(grad_accum):
            if ddp:
                model.require_backward_grad_sync = micro_step == grad_accum - 1
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_fp16):
                _, loss = model(x, y)
                loss = loss / grad_accum
            x, y = get_batch(data, batch_size, device)  # prefetch the next micro-batch
            scaler.scale(loss).backward()

        if grad_clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

        if it % 100 == 0:
            print(f"iter {it}: loss {loss.item() * grad_accum:.4f}, lr {lr:.2e}")

    if ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
