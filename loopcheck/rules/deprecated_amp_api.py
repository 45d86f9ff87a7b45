"""## What it does
Checks for `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`, also through
`from torch.cuda.amp import autocast, GradScaler` and `import torch.cuda.amp as amp`.

## Why is this bad?
Both are deprecated since PyTorch 2.4 and emit a `FutureWarning` on every construction (every
iteration, for an autocast in the loop); the device-generic `torch.amp` API replaces them and
also covers CPU, XPU and other backends with the same code.

## Fix
`torch.amp.autocast("cuda", ...)` (or `torch.autocast("cuda", ...)`) and
`torch.amp.GradScaler("cuda", ...)`, with the same keyword arguments. A file that already uses the
new API for the same object (a fallback for old PyTorch versions) is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from loopcheck.fixes import Edit, Fix
from loopcheck.model import FileModel
from loopcheck.model.amp import import_aliases, qualified
from loopcheck.model.syntax import dotted
from loopcheck.rules._base import Rule, Violation

_DEPRECATED = {"torch.cuda.amp.autocast": "autocast", "torch.cuda.amp.GradScaler": "GradScaler",
               "torch.cuda.amp.autocast_mode.autocast": "autocast", "torch.cuda.amp.grad_scaler.GradScaler": "GradScaler"}
_REPLACEMENT = {"autocast": 'torch.amp.autocast("cuda", ...)', "GradScaler": 'torch.amp.GradScaler("cuda", ...)'}
_CURRENT = {"torch.amp.autocast": "autocast", "torch.autocast": "autocast", "torch.amp.GradScaler": "GradScaler",
            "torch.amp.autocast_mode.autocast": "autocast", "torch.amp.grad_scaler.GradScaler": "GradScaler"}


class DeprecatedAmpApi(Rule):
    code = "LC206"
    message = "`torch.cuda.amp.autocast`/`torch.cuda.amp.GradScaler` are deprecated: use `torch.amp`"
    requires = ("cuda.amp", "torch.cuda import")
    fixable = True

    VALID = [
        """
scaler = torch.amp.GradScaler("cuda")
with torch.amp.autocast("cuda", dtype=torch.float16):
    loss = model(x)
""",
        """
try:
    from torch.amp import GradScaler
    scaler = GradScaler("cuda")
except ImportError:
    from torch.cuda.amp import GradScaler
    scaler = GradScaler()
""",
    ]
    INVALID = [
        """
scaler = torch.cuda.amp.GradScaler()  # LC206
with torch.cuda.amp.autocast():  # LC206
    loss = model(x)
""",
        """
from torch.cuda.amp import GradScaler, autocast
import torch.cuda.amp as amp

scaler = GradScaler(enabled=use_amp)  # LC206
with autocast(dtype=torch.float16):  # LC206
    loss = model(x)
amp_autocast = functools.partial(amp.autocast, dtype=torch.float16)  # LC206
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        aliases = import_aliases(model.index.imports)
        found: list[tuple[cst.CSTNode, cst.Call, str]] = []
        current: set[str] = set()
        for call in model.index.calls:
            for expr in (call.func, *(a.value for a in call.args)):
                names = qualified(expr, aliases)
                current |= {_CURRENT[n] for n in names if n in _CURRENT}
                deprecated = {_DEPRECATED[n] for n in names if n in _DEPRECATED}
                if len(deprecated) == 1 and len(names) == 1:
                    found.append((expr, call, deprecated.pop()))
        for node, call, what in found:
            if what in current:
                continue  # the new API is used too: this is a fallback for old PyTorch
            yield Violation(node, node, f"`torch.cuda.amp.{what}` is deprecated (FutureWarning on every use): "
                                        f"use `{_REPLACEMENT[what]}`", _rewrite(node, call, what))


def _rewrite(node: cst.CSTNode, call: cst.Call, what: str) -> Fix | None:
    """``torch.cuda.amp.X(k=v)`` -> ``torch.amp.X("cuda", k=v)``: only spelled-out calls with keyword
    arguments (the new signatures put the device first, so positional arguments would shift), and
    not through imported names, whose import other code may share."""
    if node is not call.func or dotted(call.func) != f"torch.cuda.amp.{what}" or any(a.keyword is None for a in call.args):
        return None
    device = cst.Arg(cst.SimpleString('"cuda"'))
    new = call.with_changes(func=cst.parse_expression(f"torch.amp.{what}"), args=[device, *call.args])
    return Fix(f'use `torch.amp.{what}("cuda", ...)`', (Edit(call, replacement=new),))
