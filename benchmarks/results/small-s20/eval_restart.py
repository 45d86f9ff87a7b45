"""corr_based_prediction's test() loop (main.py 182-192) on CPU: which test batches it scores, and
what the per-batch iterator costs with workers. A 40-sample test set in 10 batches of 4; the
"model" predicts the label right only for samples 0-3 (the first batch)."""
import time
import torch
from torch.utils.data import DataLoader, TensorDataset

x = torch.arange(40).float()
y = torch.zeros(40, dtype=torch.long)
loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=False, num_workers=2)
model = lambda inputs: torch.stack([(inputs < 4).float(), (inputs >= 4).float()], 1) * 10  # right on 0-3 only

for name, draw in [("next(iter(loader)) per iteration", lambda it: next(iter(loader))), ("one iterator", None)]:
    correct, total, seen = 0, 0, []
    it = iter(loader)
    start = time.time()
    tot_iters = len(loader)
    for batch_idx in range(tot_iters):
        inputs, targets = draw(it) if draw else next(it)
        with torch.no_grad():
            _, predicted = torch.max(torch.softmax(model(inputs), 1), 1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
        seen.append(int(inputs[0]))
    print(f"{name}: first samples of the batches scored {seen}; accuracy {100. * correct / total:.0f}%; "
          f"{time.time() - start:.2f}s")
