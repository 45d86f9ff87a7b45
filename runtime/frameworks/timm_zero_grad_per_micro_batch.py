"""timm's `train.py` loop with `--grad-accum-steps 4` and `optimizer.zero_grad()` moved to the top of
the batch loop (as in a loop without accumulation): each update sees only its last micro-batch.
framework-expect: steps 4, per-step 4"""
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
        optimizer.zero_grad()  # expect: LC101
        with amp_autocast():
            loss = F.cross_entropy(model(input), target)
        loss /= ACCUM_STEPS
        loss_scaler(loss, optimizer, clip_grad=1.0, clip_mode="norm", parameters=model.parameters(),
                    need_update=need_update)
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        ema.update(model, step=num_updates)
        scheduler.step_update(num_updates=num_updates)
    scheduler.step(epoch + 1)

report(model, ema)
