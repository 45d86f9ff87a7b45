"""## What it does
Checks for `Accelerator(gradient_accumulation_steps=N)` in a file whose training loop never
enters `accelerator.accumulate(...)`.

## Why is this bad?
Accelerate only accumulates inside `accumulate()`: outside it, the prepared optimizer steps on
every batch, while `accelerator.backward()` still divides the loss by N. The run does no
accumulation at all and trains with gradients N times too small.

`if accelerator.sync_gradients:` alone does not accumulate anything: outside `accumulate()` it is
always true. Nor is an `Accelerator(deepspeed_plugin=...)`: with DeepSpeed, `accelerator.backward()`
runs the engine's backward and step, and the engine accumulates (it steps only at its own boundaries)
whether or not `accumulate()` is entered. A loop that accumulates by hand (`if (step + 1) % N == 0:
optimizer.step()`) is not flagged here, nor a file that asserts the setting to be 1 (`assert
args.gradient_accumulation_steps == 1, "grad accumulation not supported yet"`): no run that gets past it
accumulates.

## Fix
Wrap the body of the batch loop in `with accelerator.accumulate(model):`.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import FileModel, Framework, Style
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.latent import asserted_one
from loopcheck.model.syntax import dotted, is_none, source
from loopcheck.rules._base import Rule, Violation

class AccumulationConfigIgnored(Rule):
    code = "LC111"
    message = "gradient accumulation is configured but the loop never enters accumulate(): nothing accumulates"
    requires = ("gradient_accumulation",)

    VALID = [
        """
def main(args):
    assert args.gradient_accumulation_steps == 1, "grad accumulation not supported yet"
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        accelerator.backward(criterion(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
""",
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
        """
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for step, batch in enumerate(loader):
    accelerator.backward(model(**batch).loss)
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
accelerator = Accelerator(gradient_accumulation_steps=4,
                          deepspeed_plugin=DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=4))
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    accelerator.backward(model(**batch).loss)
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
        """
accelerator = Accelerator(gradient_accumulation_steps=4)  # LC111
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    loss = model(**batch).loss
    accelerator.backward(loss)
    if accelerator.sync_gradients:
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        loops = [t for t in model.training_loops if any(b.framework is Framework.ACCELERATE for b in t.backwards)]
        if not loops:
            return
        if model.index.attributes & {"accumulate", "no_sync"}:
            return  # the file enters accumulate() (or handles the sync itself) somewhere
        if all(t.style in (Style.GUARDED, Style.MICRO_LOOP) for t in loops):
            return  # accumulated by hand: it does accumulate (and accelerator.backward divides by N)
        setting = accumulation_setting(model)
        if setting is not None:
            arg, name, call = setting
            if any(a.keyword is not None and a.keyword.value == "deepspeed_plugin" and not is_none(a.value)
                   for a in call.args):
                return  # DeepSpeed's engine accumulates inside accelerator.backward()
            if not arg.star and (held := dotted(arg.value)) is not None and asserted_one(model, held):
                return  # `assert args.gradient_accumulation_steps == 1`: the file never accumulates
            through = f" (in `{source(arg.value)}`)" if arg.star else ""
            yield Violation(arg, call, f"`{name}` is set{through} but no loop enters "
                                       "`accelerator.accumulate(model)`: every batch steps, with the loss "
                                       "still divided by N")
