"""## What it does
Checks for an EMA / averaged model (`AveragedModel`, timm `ModelEma*`, `ema_pytorch.EMA`,
`torch_ema.ExponentialMovingAverage`) that a training file creates but never updates.

## Why is this bad?
The EMA keeps the weights it was created with. It is often what gets evaluated and saved as
"the best model": the job reports and ships an untrained network, and nothing fails.

## Fix
Update it once per optimizer step, after `optimizer.step()`: `ema.update(model)` /
`ema_model.update_parameters(model)`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import FileModel, Kind, Role
from loopcheck.model.roles import role_of_constructor
from loopcheck.model.syntax import func_name, last_part
from loopcheck.rules._base import Rule, Violation

_UPDATES = {"update", "update_parameters", "step", "update_model_average", "update_ema", "ema_update", "apply"}


class EmaNeverUpdated(Rule):
    code = "LC402"
    message = "an EMA model is created but never updated"

    VALID = [
        """
ema = ModelEmaV2(model, decay=0.9998)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    ema.update(model)
""",
        """
swa_model = AveragedModel(model)
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer, swa_model)
""",
    ]
    INVALID = [
        """
ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))  # LC402
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
torch.save(ema_model.state_dict(), "ema.pt")
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if not model.training_loops:
            return
        updated = {last_part(e.receiver) for e in model.events(Kind.EMA_UPDATE) if e.receiver}
        for name, calls in model.roles.constructed.items():
            if name in updated or name in model.index.passed:
                continue  # updated here, or handed to code that may update it
            if model.index.methods_called.get(name, set()) & _UPDATES:
                continue
            for call in calls:
                if role_of_constructor(func_name(call) or "") is Role.EMA:
                    yield Violation(call, call, f"`{name}` is created but never updated: it keeps the initial "
                                                "weights, and evaluating or saving it ships an untrained model")
                    break
