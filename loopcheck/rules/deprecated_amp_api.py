"""## What it does
Checks for `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`, also through
`from torch.cuda.amp import autocast, GradScaler` and `import torch.cuda.amp as amp`, and for the
`torch.cuda.amp.custom_fwd` / `custom_bwd` decorators of custom autograd functions.

## Why is this bad?
Both are deprecated since PyTorch 2.4 and raise a `FutureWarning` on every construction (Python's
default filters show it once per calling line); the device-generic `torch.amp` API replaces them and
also covers CPU, XPU and other backends with the same code.

## Fix
`torch.amp.autocast("cuda", ...)` (or `torch.autocast("cuda", ...)`) and
`torch.amp.GradScaler("cuda", ...)`, with the same keyword arguments;
`@torch.amp.custom_fwd(device_type="cuda")` and `@torch.amp.custom_bwd(device_type="cuda")` (no
automatic fix for the decorators). `--fix` rewrites spelled-out
calls, and `from torch.cuda.amp import GradScaler, autocast` together with every call of the
imported names (`GradScaler("cuda")`, `autocast("cuda", ...)`) when all of its uses are such calls
and no other import binds the same name (one per test method: no fix). A file that already uses the
new API for the same object (a fallback for old PyTorch versions) is not reported, nor is a
project whose pins allow only a PyTorch older than 2.4 (`torch==1.11.0` in its requirements): there
the old spelling warns about nothing, and `torch.amp.GradScaler` does not exist before 2.3. In a
repository of several sub-projects, the pins of the nearest folder that names torch decide; a
vendored package with its own `setup.py` (a detectron2 copy under a sub-project's `third_party/`)
whose pin files name no torch takes the pins of the folders above it, up to the repository. Where no
pin file names torch, the documents at the project root decide the same way (a sub-project folder's
own README or install script, for its files): install commands in the `*.sh` scripts at the root and
in `scripts/` and on any line of the `README*` and `INSTALL*` files (`pip install torch==2.1.2`,
`conda install pytorch==1.13.0`, `torch==1.9.1+cu111`), a requirement line in their code blocks
(`torch==1.8.0`), and, under a heading such as Requirements, Dependencies or Installation, a
requirement or a version written after the name (`PyTorch == 1.11.0`, "We use Python 3.8, PyTorch
1.10.1", "tested using pytorch 1.7.1"). Every version they name must be older than 2.4, and a
statement that allows newer ones (`PyTorch 1.12+`, `PyTorch >= 1.9`, "1.10 or later", `pip install
torch` without a version) keeps the finding. Where a
lower bound says the project supports an older torch (`torch>=2.0.0`), the rewrite is unsafe if the
new name did not exist there yet (`torch.amp.GradScaler` before 2.3, `torch.amp.autocast` before 1.10).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import libcst as cst

from loopcheck.fixes import Edit, Fix
from loopcheck.model import FileModel
from loopcheck.model.amp import import_aliases, qualified
from loopcheck.model.syntax import children, dotted, walk
from loopcheck.rules._base import Rule, Violation

_DEPRECATED = {"torch.cuda.amp.autocast": "autocast", "torch.cuda.amp.GradScaler": "GradScaler",
               "torch.cuda.amp.autocast_mode.autocast": "autocast", "torch.cuda.amp.grad_scaler.GradScaler": "GradScaler"}
_REPLACEMENT = {"autocast": 'torch.amp.autocast("cuda", ...)', "GradScaler": 'torch.amp.GradScaler("cuda", ...)'}
_DECORATORS = {"torch.cuda.amp.custom_fwd": "custom_fwd", "torch.cuda.amp.custom_bwd": "custom_bwd",
               "torch.cuda.amp.autocast_mode.custom_fwd": "custom_fwd",
               "torch.cuda.amp.autocast_mode.custom_bwd": "custom_bwd"}
_CURRENT = {"torch.amp.autocast": "autocast", "torch.autocast": "autocast", "torch.amp.GradScaler": "GradScaler",
            "torch.amp.autocast_mode.autocast": "autocast", "torch.amp.grad_scaler.GradScaler": "GradScaler"}


class DeprecatedAmpApi(Rule):
    code = "LC206"
    message = "`torch.cuda.amp.autocast`/`GradScaler`/`custom_fwd`/`custom_bwd` are deprecated: use `torch.amp`"
    requires = ("cuda.amp", "torch.cuda import")
    needs_training_loop = False  # a deprecated call anywhere in the file
    reads_pins = True  # a project pinned to an older torch has no warning, nor the new API
    # every name it looks for (in `_DEPRECATED`, `_DECORATORS`, `_CURRENT`) holds one of these
    reads_statements_with = ("amp", "autocast", "GradScaler", "custom_fwd", "custom_bwd")
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
        """
try:
    from torch.amp import custom_fwd
    custom_fwd = functools.partial(custom_fwd, device_type="cuda")
except ImportError:  # PyTorch < 2.4
    from torch.cuda.amp import custom_fwd

class Op(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, x):
        return x
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
        """
from torch.cuda.amp import custom_bwd

class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float16)  # LC206
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @custom_bwd  # LC206
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.T, a.T @ grad
""",
    ]

    def check(self, model: FileModel) -> Iterator[Violation]:
        if model.project is not None and model.project.pins.below("torch", "2.4"):
            # every torch the project pins or documents predates the deprecation (and torch.amp.GradScaler)
            return
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
        imported: dict[int, Fix | None] = {}
        for node, call, what in found:
            if what in current:
                continue  # the new API is used too: this is a fallback for old PyTorch
            fix = _rewrite(node, call, what)
            moved = {what}
            if fix is None and isinstance(node, cst.Name) and node is call.func:
                source = _import_of(model, node.value)
                if source is not None:
                    if id(source) not in imported:
                        imported[id(source)] = _rewrite_import(model, source)
                    fix = imported[id(source)]
                    moved = set(_locals(source).values())
            if fix is not None and model.project is not None and model.project.pins.allows_below(
                    "torch", "2.3" if "GradScaler" in moved else "1.10"):
                # `torch>=2.0` says the project runs on a torch whose torch.amp has no GradScaler (before
                # 2.3) or no autocast (before 1.10): the rewrite would break it there
                fix = replace(fix, safe=False)
            yield Violation(node, node, f"`torch.cuda.amp.{what}` is deprecated (FutureWarning since torch 2.4): "
                                        f"use `{_REPLACEMENT[what]}`", fix)
        yield from _decorators(model, aliases)


def _decorators(model: FileModel, aliases: dict[str, set[str]]) -> Iterator[Violation]:
    """``@torch.cuda.amp.custom_fwd`` / ``@custom_bwd(...)``: deprecated like autocast, and warned
    about once per decorated function."""
    if "custom_fwd" not in model.source and "custom_bwd" not in model.source:
        return  # each name above is written out where it is imported or used: no walk of the file
    for node in walk(model.module, into_functions=True):
        if not isinstance(node, cst.Decorator):
            continue
        expr = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        names = qualified(expr, aliases)
        what = _DECORATORS.get(next(iter(names))) if len(names) == 1 else None
        if what is not None:
            yield Violation(expr, expr, f"`torch.cuda.amp.{what}` is deprecated (FutureWarning): use "
                                        f"`torch.amp.{what}(device_type=\"cuda\")`")


def _import_of(model: FileModel, local: str) -> cst.ImportFrom | None:
    """The one ``from torch.cuda.amp import ...`` that binds ``local``: None where several do (one in
    each test method), as rewriting one of them and every call of the name would hand ``"cuda"`` to
    the old class where another still binds it."""
    found = [node for node in model.index.imports
             if isinstance(node, cst.ImportFrom) and not node.relative and dotted(node.module) == "torch.cuda.amp"
             and not isinstance(node.names, cst.ImportStar) and local in _locals(node)]
    return found[0] if len(found) == 1 else None


def _locals(node: cst.ImportFrom) -> dict[str, str]:
    """Local name -> imported name, for the names torch.amp also has (GradScaler, autocast)."""
    out = {}
    for alias in node.names:  # type: ignore[union-attr]
        name = dotted(alias.name)  # type: ignore[arg-type]
        if name in ("GradScaler", "autocast"):
            local = alias.asname.name.value if alias.asname is not None and isinstance(
                alias.asname.name, cst.Name) else name
            out[local] = name
    return out


def _rewrite_import(model: FileModel, node: cst.ImportFrom) -> Fix | None:
    """``from torch.cuda.amp import GradScaler, autocast`` -> ``from torch.amp import ...`` and every
    use ``GradScaler(...)`` -> ``GradScaler("cuda", ...)``, ``autocast(k=v)`` -> ``autocast("cuda",
    k=v)``: one fix for the whole file, and none unless every use of the names is such a call (a
    name passed on, rebound or called with positional arguments for autocast keeps the old import)."""
    names = _locals(node)
    calls: list[cst.Call] = []
    uses = 0
    for parent in walk(model.module, into_functions=True):
        if isinstance(parent, (cst.Import, cst.ImportFrom, cst.ImportAlias, cst.AsName)):
            continue
        for child in children(parent):
            if not (isinstance(child, cst.Name) and child.value in names):
                continue
            if isinstance(parent, cst.Attribute) and parent.attr is child or isinstance(parent, cst.Arg) and \
                    parent.keyword is child:
                continue  # `x.autocast`, `f(autocast=...)`: another name
            uses += 1
            if not (isinstance(parent, cst.Call) and parent.func is child):
                return None
            if names[child.value] == "autocast" and any(a.keyword is None for a in parent.args):
                return None  # the old positional order (enabled, dtype) is not the new one (dtype, enabled)
            calls.append(parent)
    device = cst.Arg(cst.SimpleString('"cuda"'))
    edits = [Edit(call, replacement=call.with_changes(args=[device, *call.args])) for call in calls]
    kept = [a for a in node.names if dotted(a.name) not in ("GradScaler", "autocast")]  # type: ignore[union-attr, arg-type]
    moved = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in node.names  # type: ignore[union-attr]
             if dotted(a.name) in ("GradScaler", "autocast")]  # type: ignore[arg-type]
    if not uses or not moved:
        return None
    new = cst.ImportFrom(module=cst.parse_expression("torch.amp"), names=moved)  # type: ignore[arg-type]
    if not kept:
        edits.append(Edit(node, replacement=node.with_changes(module=cst.parse_expression("torch.amp"))))
    else:
        line = next((s for s in model.module.body if isinstance(s, cst.SimpleStatementLine) and node in s.body), None)
        if line is None:
            return None  # an import inside a function or a try: left to the author
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        edits.append(Edit(node, replacement=node.with_changes(names=kept)))
        edits.append(Edit(line, after=(cst.SimpleStatementLine([new]),)))
    return Fix('import from `torch.amp` and pass the device: `GradScaler("cuda")`, `autocast("cuda")`', tuple(edits))


def _rewrite(node: cst.CSTNode, call: cst.Call, what: str) -> Fix | None:
    """``torch.cuda.amp.X(k=v)`` -> ``torch.amp.X("cuda", k=v)``: only spelled-out calls with keyword
    arguments (the new signatures put the device first, so positional arguments would shift), and
    not through imported names, whose import other code may share."""
    if node is not call.func or dotted(call.func) != f"torch.cuda.amp.{what}" or any(a.keyword is None for a in call.args):
        return None
    device = cst.Arg(cst.SimpleString('"cuda"'))
    new = call.with_changes(func=cst.parse_expression(f"torch.amp.{what}"), args=[device, *call.args])
    return Fix(f'use `torch.amp.{what}("cuda", ...)`', (Edit(call, replacement=new),))
