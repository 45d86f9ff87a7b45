"""Mixed precision read off the training-loop model: GradScaler calls, autocast dtypes, amp imports.

Read-only helpers over ``FileModel``/``TrainingLoop``/``Event`` for the LC2xx rules. Nothing here
walks the syntax tree beyond the nodes the model points to (events, contexts, assignments, and the
index's imports and calls).

>>> import libcst as cst
>>> autocast_dtype(cst.parse_expression('torch.autocast("cpu")'), {})
'bfloat16'
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from loopcheck.model.events import Assignment, Cond, Event, Framework, Kind, Loop
from loopcheck.model.roles import Role, Roles
from loopcheck.model.syntax import (dotted, exit_statement, func_name, keyword, last_part, last_small, names_in, positional,
                                    source, walk)

FLOAT16 = "float16"
BFLOAT16 = "bfloat16"
_DTYPES = {"float16": FLOAT16, "half": FLOAT16, "bfloat16": BFLOAT16, "float32": "float32", "float": "float32"}

# -- GradScaler events ----------------------------------------------------------------------


def same_scaler(a: str | None, b: str | None) -> bool:
    """``self.scaler`` and ``scaler`` name the same GradScaler (a method and its caller)."""
    return bool(a) and bool(b) and last_part(a) == last_part(b)  # type: ignore[arg-type]


def backward_scaler(backward: Event, roles: Roles) -> str | None:
    """The GradScaler a plain-PyTorch backward goes through: ``scaler.scale(loss).backward()``, or
    ``loss = scaler.scale(loss)`` earlier in the loop and then ``loss.backward()``."""
    if backward.kind is not Kind.BACKWARD or backward.framework is not Framework.TORCH:
        return None
    if backward.scaler:
        return None if custom_scaler(roles, backward.scaler) else backward.scaler
    name = dotted(backward.loss)
    if name is None or backward.loop is None:
        return None
    sources = backward.loop.assignments_before(name, backward.order)
    if not sources:
        return None
    value = sources[-1].value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "scale":
        scaler = dotted(value.func.value)
        if scaler and roles.of(scaler) is Role.SCALER and not custom_scaler(roles, scaler):
            return scaler
    return None


def scaled_backwards(events: Iterable[Event], roles: Roles) -> list[Event]:
    """Plain-PyTorch backward passes through a GradScaler (see ``backward_scaler``)."""
    return [e for e in events if backward_scaler(e, roles)]


def scaler_steps(events: Iterable[Event]) -> list[Event]:
    """``scaler.step(optimizer)`` (not a timm/MAE ``loss_scaler(...)`` helper, which owns its update)."""
    return [e for e in events if e.kind is Kind.STEP and e.scaler and e.framework is Framework.TORCH]


def direct_steps(events: Iterable[Event]) -> list[Event]:
    """``optimizer.step()`` called on the optimizer itself (no closure, no engine)."""
    return [e for e in events if e.kind is Kind.STEP and not e.scaler and not e.closure
            and e.framework is Framework.TORCH]


def custom_scaler(roles: Roles, scaler: str | None) -> bool:
    """The file builds ``scaler`` from a scaler class other than GradScaler (``StaticScaler()``),
    whose ``step``/``update`` need not follow GradScaler's contract; factories such as
    ``get_grad_scaler()`` are taken to return a GradScaler."""
    for call in roles.constructed.get(last_part(scaler or ""), []):
        short = last_part(func_name(call) or "")
        if short[:1].isupper() and "Scaler" in short and not short.endswith("GradScaler"):
            return True
    return False


def scaler_disabled(roles: Roles, scaler: str | None) -> bool:
    """``GradScaler(enabled=False)`` written as a literal: scale/step/update are pass-throughs."""
    for call in roles.constructors(scaler, Role.SCALER):
        enabled = keyword(call, "enabled")
        if isinstance(enabled, cst.Name) and enabled.value == "False":
            return True
    return False


# -- conditions -----------------------------------------------------------------------------


def cond_key(cond: Cond) -> tuple[object, ...]:
    """A condition compared by meaning: ``if not ok: continue`` and ``if ok:`` give the same key."""
    if cond.test is None:
        return (id(cond.owner), cond.branch)
    test, negated = cond.test, cond.negated
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    return (source(test).replace(" ", "").strip("()"), negated)


def extra_conds(outer: Event, inner: Event) -> list[Cond]:
    """The conditions of ``outer`` that ``inner`` does not run under: when empty, ``outer`` runs
    on every iteration on which ``inner`` runs."""
    have = {cond_key(c) for c in inner.conds}
    return [c for c in outer.conds if cond_key(c) not in have]


def is_skip_branch(cond: Cond, loop: Loop | None) -> bool:
    """``if not torch.isfinite(loss): continue`` earlier in the iteration (or the ``else:`` of ``if
    math.isfinite(norm): ...`` ending in ``continue`` or ``return``): the rest of this iteration is
    skipped but the loop goes on. A ``return`` counts when it leaves a per-batch helper
    inlined into the loop (``train_step``), not the function that runs the loop; ``break`` ends
    the loop, so nothing after it would have used the scaler."""
    if not isinstance(cond.owner, cst.If):
        return False
    if cond.branch == "body" and isinstance(cond.owner.orelse, cst.Else):
        # `if math.isfinite(norm): scaler.step(...); scaler.update() else: return False`
        exit_stmt = last_small(cond.owner.orelse.body)
    elif cond.branch == "after-exit":
        exit_stmt = exit_statement(cond.owner)
    else:
        return False
    if isinstance(exit_stmt, cst.Continue):
        return True
    if isinstance(exit_stmt, cst.Return) and loop is not None and loop.is_loop:
        return not any(node is cond.owner for node in walk(loop.node))
    return False


# -- autocast ------------------------------------------------------------------------------


def import_aliases(imports: Iterable[cst.Import | cst.ImportFrom]) -> dict[str, set[str]]:
    """Local name -> the qualified names it may stand for (``amp`` -> ``torch.cuda.amp``)."""
    aliases: dict[str, set[str]] = {}
    for node in imports:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)  # type: ignore[arg-type]
                if not full:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    aliases.setdefault(alias.asname.name.value, set()).add(full)
                else:
                    root = full.split(".", 1)[0]
                    aliases.setdefault(root, set()).add(root)
        elif node.module is not None and not node.relative and not isinstance(node.names, cst.ImportStar):
            module = dotted(node.module)
            if not module:
                continue
            for alias in node.names:
                name = dotted(alias.name)  # type: ignore[arg-type]
                if not name:
                    continue
                local = alias.asname.name.value if alias.asname is not None and isinstance(
                    alias.asname.name, cst.Name) else name
                aliases.setdefault(local, set()).add(f"{module}.{name}")
    return aliases


def qualified(expr: cst.BaseExpression, aliases: dict[str, set[str]]) -> set[str]:
    """What a dotted expression may name once imports are resolved (``ac`` -> ``torch.cuda.amp.autocast``)."""
    name = dotted(expr)
    if not name:
        return set()
    root, _, rest = name.partition(".")
    targets = aliases.get(root)
    if not targets:
        return {name}
    return {f"{t}.{rest}" if rest else t for t in targets}


def autocast_dtype(call: cst.BaseExpression, aliases: dict[str, set[str]],
                   values: dict[str, list[cst.BaseExpression]] | None = None) -> str | None:
    """The dtype an autocast context runs the forward in (``None``: unknown or disabled).

    ``torch.autocast("cuda")`` and ``torch.cuda.amp.autocast()`` default to float16,
    ``torch.autocast("cpu")`` to bfloat16; an explicit ``dtype=`` decides; a device type, dtype
    or ``enabled`` that the code computes is unknown.
    """
    if not isinstance(call, cst.Call):
        return None
    names = qualified(call.func, aliases) or {func_name(call) or ""}
    if len(names) != 1:
        return None
    name = next(iter(names))
    enabled = keyword(call, "enabled")
    if isinstance(enabled, cst.Name) and enabled.value == "False":
        return None
    dtype_expr = keyword(call, "dtype")
    args = positional(call)
    cuda_only = name.endswith(("cuda.amp.autocast", "cuda.amp.autocast_mode.autocast"))
    if dtype_expr is None and cuda_only and len(args) >= 2:
        dtype_expr = args[1]  # torch.cuda.amp.autocast(enabled, dtype)
    elif dtype_expr is None and not cuda_only and len(args) >= 2:
        dtype_expr = args[1]  # torch.autocast(device_type, dtype)
    if dtype_expr is not None:
        return _dtype(dtype_expr, values or {}, 0)
    if cuda_only:
        return FLOAT16
    if last_part(name) != "autocast" or not (name.startswith("torch.") or name == "autocast"):
        return None
    device = args[0] if args else keyword(call, "device_type")
    text = device.evaluated_value if isinstance(device, cst.SimpleString) else None
    if text == "cuda" or (device is not None and "cuda" in _device_names(device, values or {})):
        return FLOAT16
    if text == "cpu":
        return BFLOAT16
    return None


def float16_conditions(call: cst.Call, module: cst.CSTNode, aliases: dict[str, set[str]],
                       values: dict[str, list[cst.BaseExpression]] | None = None) -> list[str]:
    """What picks float16 for an autocast that ``autocast_dtype`` reads as float16 on some path: the
    option choosing it (``{"fp16": autocast(...)}[args.precision]``, ``autocast(...) if args.amp else
    nullcontext()``, the ``if self.mixed_precision:`` whose branch opens the ``with``), a computed
    ``enabled=``, a computed device type. Empty: it always runs in float16."""
    found: list[str] = []
    for node in walk(module, into_functions=True):
        if isinstance(node, cst.IfExp) and (node.body is call or node.orelse is call):
            found.append(f"`{source(node.test)}`" + (" holds" if node.body is call else " does not hold"))
        elif isinstance(node, cst.If) and _opens(node.body, call):
            found.append(f"`{source(node.test)}` holds")  # `if self.mixed_precision: with autocast(...):`
        elif isinstance(node, cst.If) and isinstance(node.orelse, cst.Else) and _opens(node.orelse.body, call):
            found.append(f"`{source(node.test)}` does not hold")
        elif isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict) and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) \
                and not isinstance(node.slice[0].slice.value, cst.SimpleString):
            keys = [e.key for e in node.value.elements if isinstance(e, cst.DictElement) and e.value is call]
            if keys:
                found.append(f"`{source(node.slice[0].slice.value)}` is " + " or ".join(source(k) for k in keys))
    names = qualified(call.func, aliases) or {func_name(call) or ""}
    cuda_only = any(n.endswith(("cuda.amp.autocast", "cuda.amp.autocast_mode.autocast")) for n in names)
    args = positional(call)
    enabled = keyword(call, "enabled")
    if enabled is None and cuda_only and args:
        enabled = args[0]  # torch.cuda.amp.autocast(enabled, dtype)
    if enabled is not None and not (isinstance(enabled, cst.Name) and enabled.value == "True"):
        found.append(f"`{source(enabled)}` holds")
    device = None if cuda_only else (args[0] if args else keyword(call, "device_type"))
    has_dtype = keyword(call, "dtype") is not None or len(args) >= 2
    if device is not None and not has_dtype and not isinstance(device, cst.SimpleString) \
            and _device_names(device, values or {}) != {"cuda"}:
        found.append(f'`{source(device)}` is "cuda"')
    return found


def _opens(block: cst.BaseSuite, call: cst.Call) -> bool:
    """A statement of ``block`` itself (not one nested deeper) is ``with call:``: the branch holding it
    is what decides whether the forward runs under that autocast."""
    return isinstance(block, cst.IndentedBlock) and any(
        isinstance(stmt, cst.With) and any(item.item is call for item in stmt.items) for stmt in block.body)


def _device_names(expr: cst.BaseExpression, values: dict[str, list[cst.BaseExpression]]) -> set[str]:
    """The device names a computed device type is assigned in the file (``self.device_type = "cuda"``
    in one branch, ``"cpu"`` in another; ``"cuda" if cuda else "cpu"``): when "cuda" is one of them,
    that path autocasts to float16. ``device.type`` of a device the file does not show is unknown."""
    name = dotted(expr)
    found = values.get(last_part(name), []) if name is not None and last_part(name) != "type" else [expr]
    names: set[str] = set()
    for value in found:
        options = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
        names.update(o.evaluated_value for o in options
                     if isinstance(o, cst.SimpleString) and isinstance(o.evaluated_value, str))
    return names


def _dtype(expr: cst.BaseExpression, values: dict[str, list[cst.BaseExpression]], depth: int) -> str | None:
    name = dotted(expr)
    if name is not None and name.startswith("torch.") and name.count(".") == 1:
        return _DTYPES.get(last_part(name))
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        return _DTYPES.get(expr.evaluated_value)
    if name is not None and depth < 2:  # `dtype = torch.float16` once in the file
        found = values.get(last_part(name), [])
        kinds = {_dtype(v, values, depth + 1) for v in found}
        if len(kinds) == 1:
            return next(iter(kinds))
    return None


def autocast_contexts(item: Event | Assignment) -> list[cst.Call]:
    """The ``autocast(...)`` calls of the ``with`` statements around an event or assignment, and
    the autocasts a ``with`` chooses from (``autocast(...) if amp else nullcontext()``, a dict of
    contexts indexed by a precision option): the one the option picks is the one that runs."""
    found: list[cst.Call] = []
    for context in item.contexts:
        if context.kind == "autocast" and isinstance(context.call, cst.Call):
            found.append(context.call)
        elif context.kind == "autocast?":
            found.extend(_chosen_autocasts(context.call))
    return found


def _chosen_autocasts(expr: cst.BaseExpression) -> list[cst.Call]:
    if isinstance(expr, cst.IfExp):
        options = [expr.body, expr.orelse]
    elif isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Dict):
        elements = [e for e in expr.value.elements if isinstance(e, cst.DictElement)]
        key = expr.slice[0].slice if len(expr.slice) == 1 else None
        key = key.value if isinstance(key, cst.Index) else None
        if isinstance(key, cst.SimpleString):  # a literal key: only that entry runs
            elements = [e for e in elements
                        if isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key.evaluated_value]
        options = [e.value for e in elements]
    else:
        return []
    return [o for o in options if isinstance(o, cst.Call) and last_part(func_name(o) or "") == "autocast"]


def forward_autocasts(backward: Event, loop: Loop, depth: int = 3,
                      functions: dict[str, list[cst.FunctionDef]] | None = None) -> list[cst.Call]:
    """Autocast contexts around the forward whose loss ``backward`` propagates: around the
    backward itself, or around an assignment (followed back ``depth`` steps) that the loss comes from,
    or inside a helper of the same file (``functions``) whose return value the loss is."""
    found = list(autocast_contexts(backward))
    if backward.loss is None:
        return found
    found.extend(_returned_under_autocast(backward.loss, functions))
    wanted = {n.split(".", 1)[0] for n in names_in(backward.loss)}
    order = backward.order
    for _ in range(depth):
        sources = [a for a in loop.assignments if a.order < order and a.op != "for"
                   and any(n.split(".", 1)[0] in wanted for n in a.names)]
        if not sources:
            break
        latest = max(sources, key=lambda a: a.order)
        for assignment in sources:
            found.extend(autocast_contexts(assignment))
            found.extend(_returned_under_autocast(assignment.value, functions))
        wanted = {n.split(".", 1)[0] for n in names_in(latest.value)}
        order = latest.order
    return found


def _returned_under_autocast(expr: cst.BaseExpression, functions: dict[str, list[cst.FunctionDef]] | None
                             ) -> list[cst.Call]:
    """``loss = compute_loss(...)`` where ``compute_loss`` returns from inside ``with autocast(...)``."""
    if functions is None or not isinstance(expr, cst.Call):
        return []
    name = func_name(expr) or ""
    defs = functions.get(name[5:] if name.startswith("self.") else name, [])
    if len(defs) != 1:
        return []
    found: list[cst.Call] = []
    for node in walk(defs[0]):
        if not isinstance(node, cst.With) or not any(isinstance(n, cst.Return) for n in walk(node.body)):
            continue
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and last_part(func_name(call) or "") == "autocast":
                found.append(call)
    return found
