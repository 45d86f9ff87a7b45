"""Does an undivided accumulated loss matter under Adam + gradient clipping?

A small causal transformer learns a fixed random Markov chain over 64 symbols (synthetic data, CPU).
Each run: Adam, N micro-batches per step, `clip_grad_norm_(max_norm)` before the step, the loss either
divided by N (right) or undivided (LC102's shape). Reports the final held-out loss per run, over
three seeds, and how often the clip fired (total norm above the threshold). The seeds' spread is the
noise floor the undivided run's difference is judged against.

    python benchmarks/results/adam-s22/clip_effect.py > benchmarks/results/adam-s22/clip_effect.out
"""
import statistics
import sys

import torch
from torch import nn

V, T, B, N, STEPS = 64, 32, 16, 4, 300


def chain(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(V, V, generator=g) * 3, dim=1), g


def batch(probs, g, n):
    x = torch.empty(n, T + 1, dtype=torch.long)
    x[:, 0] = torch.randint(V, (n,), generator=g)
    for t in range(T):
        x[:, t + 1] = torch.multinomial(probs[x[:, t]], 1, generator=g).squeeze(1)
    return x[:, :-1], x[:, 1:]


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 64)
        self.pos = nn.Parameter(torch.zeros(T, 64))
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.out = nn.Linear(64, V)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.out(self.enc(self.emb(x) + self.pos, mask=mask, is_causal=True))


def run(seed, divided, max_norm, lr):
    probs, g = chain(0)
    data_g = torch.Generator().manual_seed(100 + seed)
    torch.manual_seed(seed)
    model = Tiny()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    fired = 0
    for _ in range(STEPS):
        for _ in range(N):
            x, y = batch(probs, data_g, B)
            loss = loss_fn(model(x).reshape(-1, V), y.reshape(-1))
            (loss / N if divided else loss).backward()
        if max_norm is not None:
            norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            fired += bool(norm > max_norm)
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        x, y = batch(probs, torch.Generator().manual_seed(999), 256)
        held = loss_fn(model(x).reshape(-1, V), y.reshape(-1)).item()
    return held, fired


def main():
    torch.set_num_threads(1)
    print(f"V={V} T={T} micro-batch={B} N={N} steps={STEPS}, torch {torch.__version__}")
    print("lr      max_norm  loss     held-out loss (3 seeds)        mean    clip fired (of steps)")
    for lr in (1e-3, 3e-4):
        for max_norm in (None, 0.25, 1.0):
            for divided in (True, False):
                results = [run(seed, divided, max_norm, lr) for seed in range(3)]
                losses = [h for h, _ in results]
                print(f"{lr:<7g} {str(max_norm):<9} {'/ N' if divided else 'undiv':<8} "
                      f"{' '.join(f'{h:.4f}' for h in losses):<30} {statistics.mean(losses):.4f}  "
                      f"{' '.join(str(f) for _, f in results)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
