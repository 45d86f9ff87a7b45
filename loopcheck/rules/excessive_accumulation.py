"""## What it does
Checks for gradient accumulation over more than 16 micro-batches, where the factor is visible in
the file: a literal (`if (i + 1) % 32 == 0`, `range(64)`), a name assigned a literal exactly once
(`accum_steps = 32`), an argparse option's `default=`, or
`Accelerator(gradient_accumulation_steps=32)`. Opt-in (`--extend-select LC110`).

## Why is this bad?
A window that long makes each optimizer step wait for many forward/backward passes: few
updates per hour, stale BatchNorm statistics relative to the weights, and an effective batch
that usually calls for a retuned learning rate and warmup. When the goal is a large batch,
data parallelism over more devices (or a larger micro-batch with activation checkpointing)
reaches it faster. A factor the file computes or reads from a config is not guessed.

## Fix
Use a larger micro-batch (activation checkpointing, bfloat16) or more data-parallel devices and
a smaller accumulation factor; or suppress the finding if the long window is intended.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from loopcheck.model import FileModel, Style
from loopcheck.model.accelerate import accelerator_calls
from loopcheck.model.syntax import dotted, keyword, last_part, method, positional
from loopcheck.model.training import micro_count
from loopcheck.rules._base import Rule, Violation

LIMIT = 16


class ExcessiveAccumulation(Rule):
    code = "LC110"
    message = "gradients are accumulated over more than 16 micro-batches"

    VALID = [
        """
accum_steps = 8
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
accum_steps = config["accum_steps"]
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ]
    INVALID = [
        """
accum_steps = 64  # LC110
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
parser.add_argument("--grad-accum", type=int, default=32)  # LC110
args = parser.parse_args()
while step < max_steps:
    for micro in range(args.grad_accum):
        loss = model(*get_batch()) / args.grad_accum
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        for training in model.training_loops:
            factor: cst.BaseExpression | None = None
            if training.style is Style.GUARDED:
                factor = training.modulus
            elif training.style is Style.MICRO_LOOP:
                factor = micro_count(training.loop)
            elif training.style is Style.ACCELERATE:
                factor = _accelerator_factor(model)
            literal = _literal(model, factor) if factor is not None else None
            if literal is not None and (value := _int(literal)) is not None and value > LIMIT:
                yield Violation(literal, literal, f"gradients are accumulated over {value} micro-batches "
                                                  f"(more than {LIMIT}): long, stale windows; prefer a larger "
                                                  "micro-batch or data parallelism")


def _int(expr: cst.BaseExpression) -> int | None:
    """``32`` or ``4 * 8``: a product or sum of integer literals."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Add)):
        left, right = _int(expr.left), _int(expr.right)
        if left is not None and right is not None:
            return left * right if isinstance(expr.operator, cst.Multiply) else left + right
    return None


def _literal(model: FileModel, factor: cst.BaseExpression) -> cst.BaseExpression | None:
    """The literal the accumulation factor comes from, where the file makes it certain."""
    if _int(factor) is not None:
        return factor
    name = dotted(factor)
    if name is None:
        return None
    short = last_part(name)
    if re.search(rf"\b{re.escape(short)}\s*(//|[-+*/%]|<<|>>)=", model.source):
        return None  # changed after its assignment (`accum //= world_size`)
    values = model.index.values.get(short, [])
    options = _argparse_defaults(model, short)
    if len(values) == 1 and not options and _int(values[0]) is not None:
        return values[0]
    if not values and len(options) == 1 and "." in name:
        return options[0]
    return None


def _argparse_defaults(model: FileModel, dest: str) -> list[cst.BaseExpression]:
    """``default=`` of every ``add_argument`` whose destination is ``dest``."""
    found = []
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] != "add_argument":
            continue
        flags = [a.value.strip("'\"") for a in positional(call) if isinstance(a, cst.SimpleString)]
        explicit = keyword(call, "dest")
        target = explicit.value.strip("'\"") if isinstance(explicit, cst.SimpleString) else next(
            (f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")), flags[0] if flags else None)
        if target == dest:
            default = keyword(call, "default")
            if default is not None and _int(default) is not None:
                found.append(default)
            else:
                return []  # an option with no literal default: not certain
    return found


def _accelerator_factor(model: FileModel) -> cst.BaseExpression | None:
    factors = [f for c in accelerator_calls(model) if (f := keyword(c, "gradient_accumulation_steps")) is not None]
    return factors[0] if len(factors) == 1 else None
