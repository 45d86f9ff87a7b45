"""What Hugging Face Accelerate does with the file's objects (read from accelerate's own source):

- ``Accelerator(gradient_accumulation_steps=N)`` sets N; ``accelerator.backward(loss)`` divides the
  loss by N whether or not ``accumulate()`` is entered (``loss / self.gradient_accumulation_steps``).
- ``accumulate(model)`` decides ``sync_gradients`` and enters ``model.no_sync()`` on the other
  micro-batches; outside it ``sync_gradients`` stays True, so prepared optimizers, schedulers and
  ``zero_grad()`` act on every call and every backward all-reduces.
- a scheduler handed to ``prepare`` becomes an ``AcceleratedScheduler`` whose ``step()`` does nothing
  while ``sync_gradients`` is False (Accelerate 0.16 and later: before, it stepped on every call, so a
  project pinning an older version gets no gate), unless the Accelerator is built with
  ``step_scheduler_with_optimizer=False``; ``sync_gradients`` keeps the value the last ``accumulate()``
  set, so the gate holds wherever in the loop the scheduler steps.
- ``accelerator.clip_grad_norm_`` is not gated: it clips whatever ``.grad`` holds when it is called.
- ``accelerator.prepare(model)`` wraps the model in ``DistributedDataParallel`` under a
  multi-process launch.
- ``sync_gradients`` is True exactly on the micro-batch whose optimizer step is real, so a counter
  the loop adds 1 to only under ``if accelerator.sync_gradients:`` counts optimizer updates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.roles import Role
from loopcheck.model.values import call_keywords
from loopcheck.model.syntax import (dotted, func_name, int_value, last_part, lines, method, names_in, positional,
                                    small_statements, walk)

if TYPE_CHECKING:
    from loopcheck.model import FileModel, Loop

_SETTINGS = ("gradient_accumulation_steps", "gradient_accumulation_plugin")
_NOT_DDP = ("fsdp_plugin", "deepspeed_plugin", "megatron_lm_plugin")


def accelerator_calls(model: FileModel) -> list[cst.Call]:
    """The file's own ``Accelerator(...)`` calls (none: its settings, N among them, are unknown here)."""
    return [call for call in model.index.calls if last_part(func_name(call) or "") == "Accelerator"]


def accumulation_setting(model: FileModel) -> tuple[cst.Arg, str, cst.Call] | None:
    """``gradient_accumulation_steps=N`` (or a plugin) given to ``Accelerator(...)``, unless a literal 1:
    the argument that sets it, the setting's name and the ``Accelerator(...)`` call. Also read through
    a dict of the file handed over as ``Accelerator(**accelerator_kwargs)`` (``accelerator_kwargs =
    {"gradient_accumulation_steps": args.gradient_accumulation_steps}``, or ``dict(...)``): the
    argument is then ``**accelerator_kwargs``."""
    for call in accelerator_calls(model):
        for name, setting, arg in call_keywords(call, model.index):
            if name in _SETTINGS and int_value(setting) != 1:
                return arg, name, call
    return None


def scheduler_gated(model: FileModel, name: str | None) -> bool | None:
    """Whether Accelerate advances the scheduler ``name`` only when the optimizer steps: True for one the
    file hands to ``accelerator.prepare``, False for one it leaves out while preparing other objects (a
    plain torch scheduler, stepped on every call), for any under
    ``Accelerator(step_scheduler_with_optimizer=False)`` or in a project pinning Accelerate < 0.16,
    None where the file prepares nothing (its objects come prepared from elsewhere, or not at all)."""
    if model.project is not None and model.project.pins.below("accelerate", "0.16"):
        return False  # the gate came with accelerate 55a5284 (0.16); before it every scheduler steps per call
    for call in accelerator_calls(model):
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "step_scheduler_with_optimizer":
                if isinstance(arg.value, cst.Name) and arg.value.value == "False":
                    return False
                if not (isinstance(arg.value, cst.Name) and arg.value.value == "True"):
                    return None  # set by configuration
    if model.roles.is_prepared(name):
        return True
    return False if model.roles.prepared else None


def accelerates_ddp(model: FileModel) -> bool:
    """No ``Accelerator(...)`` of the file is built with an FSDP / DeepSpeed / Megatron plugin (their
    engines decide the sync; a module they prepare is no DDP module)."""
    return not any(a.keyword is not None and a.keyword.value in _NOT_DDP for c in accelerator_calls(model) for a in c.args)


def prepared_modules(model: FileModel, trained: set[str]) -> list[cst.Call]:
    """``accelerator.prepare(model, ...)`` calls that prepare a module the file trains, or a wrapper
    module built around one (``self.wrapper = PretrainWrapper(model=model)``, then
    ``accelerator.prepare(self.wrapper)``): a DDP wrap whenever the script runs under a
    multi-process launch (``accelerate launch``)."""
    if not accelerates_ddp(model):
        return []  # FSDP / DeepSpeed / Megatron plugins: no DDP wrapper, the engine decides the sync
    found = []
    for call in model.index.calls:
        called = method(call)
        if called is None or called[1] not in ("prepare", "prepare_model"):
            continue
        if model.roles.of(dotted(called[0])) is not Role.ACCELERATOR:
            continue
        if any(dotted(arg) in trained or _wraps(model, dotted(arg), trained) for arg in _handed(call, model)) \
                or any(value is call for name in trained for value in model.index.values.get(last_part(name), ())):
            found.append(call)  # (`model = accelerator.prepare(torch.nn.Linear(2, 2))`: bound to the trained name)
    return found


def _handed(call: cst.Call, model: FileModel) -> list[cst.BaseExpression]:
    """What ``prepare`` is handed: its positional arguments, and the items of a list or tuple the file
    builds and unpacks into it (``components = [self.model, self.optimizer]``, then
    ``accelerator.prepare(*components)``)."""
    handed = positional(call)
    for arg in call.args:
        if arg.star == "*" and (name := dotted(arg.value)):
            for value in model.index.values.get(last_part(name), ()):
                if isinstance(value, (cst.List, cst.Tuple)):
                    handed += [e.value for e in value.elements if isinstance(e, cst.Element)]
    return handed


def _wraps(model: FileModel, name: str | None, trained: set[str]) -> bool:
    """``name`` is assigned a module built from a trained one: ``Wrapper(model=model)``,
    ``Wrapper(self.model, ...)`` (the trained module is read by its last name, as ``self.model = model``
    makes them one)."""
    if not name:
        return False
    shorts = {last_part(t) for t in trained}
    return any(isinstance(value, cst.Call) and last_part(func_name(value) or "") != "prepare"
               and any(last_part(dotted(arg.value) or "") in shorts for arg in value.args)
               for value in model.index.values.get(last_part(name), ()))


def updates_bound(loop: Loop, step_test: cst.BaseExpression | None = None) -> cst.BaseExpression | None:
    """The bound a loop nest stops at on a counter of optimizer updates: ``while done < max_steps:``
    (the loop itself) or ``if done >= max_steps: break`` (in its body), where the only write of
    ``done`` in the nest is ``done += 1`` under a top-level ``if accelerator.sync_gradients:`` (or
    under ``if <step_test>:``, the test a loop that accumulates by hand steps under)."""
    node = loop.node
    nest = loop.parent.node if loop.parent is not None and loop.parent.is_loop else node
    tests = [node.test] if isinstance(node, cst.While) else []
    tests += [stmt.test for stmt in lines(node.body) if isinstance(stmt, cst.If) and stmt.orelse is None
              and _only_break(stmt.body)]
    for test in tests:
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        op, bound = test.comparisons[0].operator, test.comparisons[0].comparator
        if not isinstance(op, cst.LessThan if test is getattr(node, "test", None) else cst.GreaterThanEqual):
            continue
        counter = dotted(test.left)
        if counter is not None and counter not in names_in(bound) and _synced_count(node, nest, counter, step_test):
            return bound
    return None


def _synced_count(node: cst.For | cst.While, nest: cst.CSTNode, counter: str,
                  step_test: cst.BaseExpression | None) -> bool:
    writes = [n for n in walk(nest) if isinstance(n, (cst.AugAssign, cst.AssignTarget, cst.AnnAssign))
              and dotted(n.target) == counter]
    if len(writes) != 1 or not isinstance(writes[0], cst.AugAssign) or \
            not isinstance(writes[0].operator, cst.AddAssign) or int_value(writes[0].value) != 1:
        return False
    return any(isinstance(stmt, cst.If) and stmt.orelse is None and (
        stmt.test is step_test if step_test is not None else
        isinstance(stmt.test, cst.Attribute) and stmt.test.attr.value == "sync_gradients")
        and writes[0] in small_statements(stmt.body) for stmt in lines(node.body))


def _only_break(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    smalls = [small for stmt in statements if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
              for small in stmt.body]  # type: ignore[union-attr]
    return len(statements) == 1 and len(smalls) == 1 and isinstance(smalls[0], cst.Break)
