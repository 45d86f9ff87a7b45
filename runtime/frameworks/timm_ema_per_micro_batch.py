"""timm's `train.py` loop with `--grad-accum-steps 4 --model-ema` where the EMA update was moved
above the `need_update` check: the EMA averages on every micro-batch (4 times per update, each
time with the same weights), so it tracks the model 4x faster than its decay says.
framework-expect: steps 4, per-step 4, ema ModelEmaV3 16"""
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
        ema.update(model, step=num_updates)  # expect: LC401
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        scheduler.step_update(num_updates=num_updates)
    scheduler.step(epoch + 1)

report(model, ema)
