"""Run the unmodified `SimCLR.train` of a sthalles/SimCLR fork (AdityaKane2001/SimCLR@8d70c82) on CPU
with a tiny encoder and synthetic two-view batches, the scheduler built as its run.py builds it
(`CosineAnnealingLR(optimizer, T_max=len(train_loader))`), and print the learning rate per epoch.

    python simclr_schedule.py /path/to/checkout [epochs] [batches]
"""
import sys
import tempfile
import types
from argparse import Namespace

import torch

root, epochs, batches = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30, \
    int(sys.argv[3]) if len(sys.argv) > 3 else 20
sys.path.insert(0, root)
log_dir = tempfile.mkdtemp()


class SummaryWriter:  # tensorboard is not installed here: a writer that only has a log directory
    def __init__(self, *a, **k):
        self.log_dir = log_dir

    def add_scalar(self, *a, **k):
        pass


sys.modules["torch.utils.tensorboard"] = types.SimpleNamespace(SummaryWriter=SummaryWriter)
from simclr import SimCLR  # noqa: E402  (the repository's own class)

torch.manual_seed(0)
views = [(torch.randn(8, 16), torch.randn(8, 16)) for _ in range(batches)]
train_loader = [([a, b], torch.zeros(8)) for a, b in views]  # len() = batches per epoch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
args = Namespace(epochs=epochs, batch_size=8, n_views=2, temperature=0.07, fp16_precision=False,
                 device=torch.device("cpu"), log_every_n_steps=10 ** 9, arch="mlp", disable_cuda=True)
optimizer = torch.optim.Adam(model.parameters(), 0.0003, weight_decay=1e-4)
# as run.py builds it
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0, last_epoch=-1)
lrs = []
original = scheduler.step
scheduler.step = lambda *a, **k: (original(*a, **k), lrs.append(optimizer.param_groups[0]["lr"]))[0]
import os  # noqa: E402
os.chdir(log_dir)
SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args).train(train_loader)
print(f"T_max={len(train_loader)} batches; epochs={epochs}; scheduler steps={len(lrs)}; "
      f"optimizer steps={epochs * batches}")
print(f"lr after the last epoch: {optimizer.param_groups[0]['lr']:.3e} "
      f"({optimizer.param_groups[0]['lr'] / 3e-4:.2f} of the base 3e-4)")
print("lr per scheduler step:", " ".join(f"{lr / 3e-4:.2f}" for lr in lrs))
