"""What the timm scenarios share: the pieces timm's `train.py` trains with, from the timm
package: a tiny model from timm's registry (`test_vit`, no download), `create_optimizer_v2`,
`create_scheduler_v2` (per-update cosine with warmup, `step_update` after each update and
`step` at each epoch end), `NativeScaler` (train.py uses it for float16 on CUDA; here a CPU GradScaler on float32 losses, as
CPU float16 autocast is slow: the scale/unscale/clip/step/update path is the same),
`ModelEmaV3` and `dispatch_clip_grad`. 2 epochs of 8 micro-batches of 4 random 32x32 images,
`grad_accum_steps` 4: 4 optimizer updates. The training loops in the scenario files follow
`train.py`'s `train_one_epoch` (written here, not copied)."""
from __future__ import annotations

import contextlib

import cpu_torchvision  # noqa: F401  (first: timm imports torchvision)
import timm
import torch
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3, NativeScaler
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2
ACCUM_STEPS = 4


def setup():
    torch.manual_seed(0)
    model = timm.create_model("test_vit", pretrained=False, num_classes=10, img_size=32)
    loader = DataLoader(TensorDataset(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))),
                        batch_size=4)
    optimizer = create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)
    updates_per_epoch = (len(loader) + ACCUM_STEPS - 1) // ACCUM_STEPS
    scheduler, _ = create_scheduler_v2(optimizer, "cosine", num_epochs=EPOCHS, warmup_epochs=1,
                                       warmup_lr=1e-5, step_on_epochs=False,
                                       updates_per_epoch=updates_per_epoch)
    ema = ModelEmaV3(model, decay=0.9)
    scaler = NativeScaler(device="cpu")
    autocast = contextlib.nullcontext  # train.py: suppress without --amp
    return model, loader, optimizer, scheduler, ema, scaler, autocast


def report(model: torch.nn.Module, ema: ModelEmaV3) -> None:
    total = sum(p.detach().float().abs().sum() for p in model.parameters())
    ema_total = sum(p.detach().float().abs().sum() for p in ema.module.parameters())
    print(f"parameters {float(total):.4f} ema {float(ema_total):.4f}")
