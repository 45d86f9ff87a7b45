"""timm's `train.py` loop with `--grad-accum-steps 4` and the scheduler's `step_update` moved above
the `need_update` check, counting micro-batches: timm's per-update cosine (warmup 1 epoch) runs
4x too fast: the warmup and the decay are over within the first update, whose micro-batches each
see another LR; from the second update on the LR stays at its minimum. timm schedulers are not
`torch.optim.lr_scheduler` objects: only the LR the optimizer actually uses shows it.
framework-expect: steps 4, per-step 4, lr 0.000146447 0 0 0"""
import torch.nn.functional as F
from timm_common import ACCUM_STEPS, EPOCHS, report, setup

model, loader, optimizer, scheduler, ema, loss_scaler, amp_autocast = setup()
num_updates = 0
for epoch in range(EPOCHS):
    model.train()
    last_batch_idx = len(loader) - 1
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        need_update = batch_idx == last_batch_idx or (batch_idx + 1) % ACCUM_STEPS == 0
        with amp_autocast():
            loss = F.cross_entropy(model(input), target)
        loss /= ACCUM_STEPS
        loss_scaler(loss, optimizer, clip_grad=1.0, clip_mode="norm", parameters=model.parameters(),
                    need_update=need_update)
        micro_batches = epoch * len(loader) + batch_idx + 1
        scheduler.step_update(num_updates=micro_batches)  # expect: LC301
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        ema.update(model, step=num_updates)
    scheduler.step(epoch + 1)

report(model, ema)
