"""## What it does
Checks for `Accelerator(gradient_accumulation_steps=N)` in a file whose training loop never
enters `accelerator.accumulate(...)`.

## Why is this bad?
Accelerate only accumulates inside `accumulate()`: outside it, the prepared optimizer steps on
every batch, while `accelerator.backward()` still divides the loss by N. The run does no
accumulation at all and trains with gradients N times too small.

## Fix
Wrap the body of the batch loop in `with accelerator.accumulate(model):`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import FileModel, Framework, Kind
from loopcheck.model.syntax import func_name, int_value, last_part
from loopcheck.rules._base import Rule, Violation

_SETTINGS = ("gradient_accumulation_steps", "gradient_accumulation_plugin")


class AccumulationConfigIgnored(Rule):
    code = "LC111"
    message = "gradient accumulation is configured but the loop never enters accumulate(): nothing accumulates"
    requires = ("gradient_accumulation",)

    VALID = [
        """
accelerator = Accelerator(gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
accelerator = Accelerator(gradient_accumulation_steps=4)  # LC111
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    loss = model(**batch).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if not any(b.framework is Framework.ACCELERATE for b in model.events(Kind.BACKWARD)):
            return
        if model.index.attributes & {"accumulate", "sync_gradients", "no_sync"}:
            return  # the file gates accumulation itself somewhere
        for call in model.index.calls:
            if last_part(func_name(call) or "") != "Accelerator":
                continue
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in _SETTINGS and int_value(arg.value) != 1:
                    yield Violation(arg, call, f"`{arg.keyword.value}` is set but no loop enters "
                                               "`accelerator.accumulate(model)`: every batch steps, with the loss "
                                               "still divided by N")

