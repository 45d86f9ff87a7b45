"""timm's `train.py` loop with `--grad-accum-steps 4` and the per-update `step_update` moved
before the update it counts: the step it precedes already uses the LR of the next update, so the
first update skips the warmup's first value (1e-5) and trains at 0.000505. The call of
`step_update(num_updates=0)` before training sets the schedule's first value and moves nothing:
not a finding. timm schedulers are not `torch.optim.lr_scheduler` objects: only the LR the
optimizer actually used at its first step shows it.
framework-expect: steps 4, per-step 4, lr 0.000505 0.0005 0.000146447 0"""
import torch.nn.functional as F
from timm_common import ACCUM_STEPS, EPOCHS, report, setup

model, loader, optimizer, scheduler, ema, loss_scaler, amp_autocast = setup()
num_updates = 0
scheduler.step_update(num_updates=num_updates)
for epoch in range(EPOCHS):
    model.train()
    last_batch_idx = len(loader) - 1
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        need_update = batch_idx == last_batch_idx or (batch_idx + 1) % ACCUM_STEPS == 0
        if need_update:
            num_updates += 1
            scheduler.step_update(num_updates=num_updates)  # expect: LC302
        with amp_autocast():
            loss = F.cross_entropy(model(input), target)
        loss /= ACCUM_STEPS
        loss_scaler(loss, optimizer, clip_grad=1.0, clip_mode="norm", parameters=model.parameters(),
                    need_update=need_update)
        if not need_update:
            continue
        optimizer.zero_grad()
        ema.update(model, step=num_updates)
    scheduler.step(epoch + 1)

report(model, ema)
