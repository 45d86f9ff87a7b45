"""## What it does
Checks for a forward pass under float16 autocast whose loss is back-propagated in a file that
creates no GradScaler (and no loss-scaler helper). `torch.autocast("cuda")` and
`torch.cuda.amp.autocast()` run in float16 unless given another `dtype`; bfloat16
(`dtype=torch.bfloat16`, `torch.autocast("cpu")`) needs no scaler and is not reported.
An autocast that an option picks counts when one of its choices is float16: a dict of contexts
indexed by a precision option (`{"bf16": ..., "fp16": torch.autocast("cuda", dtype=torch.float16)}[args.precision]`),
`autocast(...) if amp else nullcontext()`, an `if self.mixed_precision:` whose branch opens the
`with`, or a device type the file computes as `"cuda"` or `"cpu"`;
the finding then says what picks float16 ("may run under float16 autocast (when `args.precision` is
\"fp16\")"), and says it runs under float16 only where nothing else decides.
A scaler is known by its constructor, its name, or what the file does with it: an object handed in
under another name (LSGM's `grad_scalar`) whose `scale`, `step` and `update` the file calls is one. A
file that only hands a `scaler=None` parameter to its own functions, scaling no loss anywhere, has
none; one that hands a scaler to a function of another module may scale there.

## Why is this bad?
float16 represents nothing below about 6e-8: small gradients of the float16 activations underflow
to zero during backward and those parameters silently stop learning. GradScaler multiplies the loss
before backward so the gradients stay representable, and skips the steps that overflow.

## Fix
Create `scaler = torch.amp.GradScaler("cuda")` and use `scaler.scale(loss).backward()`,
`scaler.step(optimizer)`, `scaler.update()`; or autocast to bfloat16 where the hardware supports it.
Accelerate, Lightning, DeepSpeed and timm/MAE loss scalers manage the scaler themselves and are
not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopcheck.model import FileModel, Framework, Style
from loopcheck.model.amp import (FLOAT16, autocast_dtype, backward_scaler, float16_conditions, forward_autocasts,
                                 import_aliases)
from loopcheck.model.syntax import own_call_name, source
from loopcheck.rules._base import Rule, Violation

# Text that shows some loss scaling is done in the file (a GradScaler built or used, a timm/MAE helper,
# Apex); a name alone (a `scaler=None` parameter handed along) scales nothing
_SCALING_TEXT = ("Scaler", ".scale(", "loss_scale", "scale_loss", "amp.initialize")


class Fp16WithoutScaler(Rule):
    code = "LC205"
    message = "float16 autocast with backward but no GradScaler: small gradients underflow to zero"
    requires_all = ("autocast",)  # around a training loop's forward (the default `requires`)

    VALID = [
        """
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cpu"):
        loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
    ]
    INVALID = [
        """
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):  # LC205
        loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
        """
from torch.cuda.amp import autocast

for x, y in loader:
    optimizer.zero_grad()
    with autocast():  # LC205
        output = model(x)
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
""",
        """
def compute_loss(model, x, y):
    with torch.autocast("cuda", dtype=torch.float16):  # LC205
        return F.cross_entropy(model(x), y)

for x, y in loader:
    optimizer.zero_grad()
    loss = compute_loss(model, x, y)
    loss.backward()
    optimizer.step()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if any(text in model.source for text in _SCALING_TEXT) or not model.training_loops \
                or "scaler" in model.source and _hands_a_scaler_out(model):
            return
        aliases = import_aliases(model.index.imports)
        for training in model.training_loops:
            if training.style in (Style.FRAMEWORK, Style.ACCELERATE):
                continue
            for backward in training.backwards:
                if backward.framework is not Framework.TORCH or backward_scaler(backward, model.roles):
                    continue
                for call in forward_autocasts(backward, training.loop, functions=model.index.functions):
                    if autocast_dtype(call, aliases, model.index.values) == FLOAT16:
                        yield Violation(call, call, _message(float16_conditions(call, model.module, aliases,
                                                                                model.index.values)))


def _hands_a_scaler_out(model: FileModel) -> bool:
    """A call the file hands a scaler to (``backward(args, loss, scaler, optimizer, model)``) that is not
    one of its own functions: the scaling may happen there."""
    for call in model.index.calls:
        if any("scaler" in source(a.value).lower() for a in call.args):
            name = own_call_name(call)
            if name is None or name not in model.index.functions:
                return True
    return False


def _message(conditions: list[str]) -> str:
    """Says float16 as it is picked: always, or only when an option or device picks it."""
    runs = "runs under float16 autocast" if not conditions else \
        f"may run under float16 autocast (when {' and '.join(conditions)})"
    return (f"the forward {runs} and its loss is back-propagated without a GradScaler: small gradients "
            "underflow to zero (use GradScaler, or bfloat16)")
