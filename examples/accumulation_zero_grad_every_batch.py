# expected: LC101, LC301
# Accumulation bolted onto an existing loop by gating only optimizer.step(): optimizer.zero_grad()
# still runs at the top of every micro-batch, so each step sees the gradient of the last micro-batch
# alone (3 of every 4 backward passes are thrown away, LC101), and scheduler.step() still runs on
# every micro-batch although its horizon is counted in optimizer updates, so the warmup/decay
# schedule finishes after a quarter of the run and the remaining updates train at a learning rate
# of zero (LC301). Fix: zero the gradients and step the scheduler inside the step branch.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class TextClassifier(nn.Module):
    def __init__(self, vocab=5000, dim=128, num_classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, num_classes))

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def main(epochs=3, batch_size=32, accum_steps=4, lr=1e-3, warmup_updates=30):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = torch.randint(0, 5000, (3200, 48))
    labels = torch.randint(0, 4, (3200,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=batch_size, shuffle=True)

    model = TextClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    num_updates = epochs * math.ceil(len(loader) / accum_steps)

    def linear_warmup_decay(update):
        if update < warmup_updates:
            return (update + 1) / warmup_updates
        return max(0.0, (num_updates - update) / max(1, num_updates - warmup_updates))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay)

    for epoch in range(epochs):
        model.train()
        for step, (tok, lab) in enumerate(loader):
            optimizer.zero_grad()
            tok, lab = tok.to(device), lab.to(device)
            loss = F.cross_entropy(model(tok), lab)
            loss = loss / accum_steps
            loss.backward()

            if (step + 1) % accum_steps == 0 or (step + 1) == len(loader):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            scheduler.step()

            if step % 50 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item() * accum_steps:.4f}")


if __name__ == "__main__":
    main()
