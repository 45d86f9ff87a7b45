"""How many times per call Accelerate steps a scheduler, against the process count a horizon shows.

Read from accelerate's own source (``accelerate/scheduler.py``, the same from 0.7, where ``prepare``
began to take schedulers, to 1.15): a scheduler handed to ``accelerator.prepare`` becomes an
``AcceleratedScheduler`` whose ``step()``, once the optimizer really steps, calls the wrapped
scheduler ``AcceleratorState().num_processes`` times, because each process's batches are a 1/P share
of the global batch; once only where the Accelerator splits batches (``split_batches=True``, also
``DataLoaderConfiguration(split_batches=True)``) or is built with ``step_scheduler_with_optimizer=False``.
A scheduler left out of ``prepare`` is stepped once per call. So a prepared scheduler's horizon is
counted in optimizer steps times the process count (``max_train_steps * accelerator.num_processes``,
the diffusers scripts' form) and an unprepared one's in optimizer steps alone; the other pairings
run the schedule P times too fast or too slow on P processes, and are right on one.

A count of the data taken before ``prepare`` shards the loader (``len(train_dataloader) * epochs //
accumulation`` in accelerate's own examples) is already the global count, P times the per-process
one: a horizon built from a ``len(...)`` is never read as a per-process count here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.accelerate import accelerator_calls
from loopcheck.model.horizon import times_processes
from loopcheck.model.syntax import func_name, last_part, method, names_in, walk

if TYPE_CHECKING:
    from loopcheck.model import FileModel
    from loopcheck.model.index import Index

_ONE_STEP_SETTINGS = ("split_batches", "step_scheduler_with_optimizer", "dataloader_config")


def steps_per_process(model: FileModel) -> bool:
    """The file builds its Accelerator(s) and none may step a prepared scheduler once per call: no
    ``split_batches`` or ``step_scheduler_with_optimizer`` other than their defaults, no dataloader
    configuration built elsewhere, no settings handed over as ``**kwargs``. False where the file
    builds no Accelerator (its settings are not known here)."""
    calls = accelerator_calls(model)
    if not calls:
        return False
    for call in calls:
        for arg in call.args:
            if arg.star:
                return False
            if arg.keyword is None or arg.keyword.value not in _ONE_STEP_SETTINGS:
                continue
            if arg.keyword.value == "split_batches" and not _is(arg.value, "False"):
                return False
            if arg.keyword.value == "step_scheduler_with_optimizer" and not _is(arg.value, "True"):
                return False
            if arg.keyword.value == "dataloader_config" and not _plain_dataloader_config(arg.value, model):
                return False
    return True


def _is(value: cst.BaseExpression, word: str) -> bool:
    return isinstance(value, cst.Name) and value.value == word


def _plain_dataloader_config(value: cst.BaseExpression, model: FileModel) -> bool:
    """``DataLoaderConfiguration(...)`` built in the file (inline or bound to a name) without
    ``split_batches`` other than False."""
    values = [value] if isinstance(value, cst.Call) else \
        model.index.values.get(value.value, []) if isinstance(value, cst.Name) else []
    return bool(values) and all(
        isinstance(v, cst.Call) and last_part(func_name(v) or "") == "DataLoaderConfiguration"
        and not any(a.star or a.keyword is not None and a.keyword.value == "split_batches"
                    and not _is(a.value, "False") for a in v.args) for v in values)


def left_unprepared(model: FileModel, name: str | None) -> bool:
    """The scheduler ``name`` is never the result of ``accelerator.prepare`` while the file prepares
    other objects (``model, optimizer, _, _ = accelerator.prepare(model, optimizer, loader,
    lr_scheduler)`` discards the prepared one): the loop steps the plain torch scheduler, once per call.
    Not where the file prepares anything one by one (``prepare_scheduler``)."""
    if not name or not model.roles.prepared or model.roles.is_prepared(name):
        return False
    return not any((called := method(call)) is not None and called[1] == "prepare_scheduler"
                   for call in model.index.calls)


def process_scaled(expr: cst.BaseExpression, index: Index, depth: int = 0) -> bool:
    """``expr`` is a count times ``accelerator.num_processes``, directly or as every value the file
    gives the name it is (``num_training_steps_for_scheduler = args.max_train_steps *
    accelerator.num_processes``)."""
    if times_processes(expr) is not None:
        return True
    if depth < 3 and isinstance(expr, cst.Name):
        values = index.values.get(expr.value, [])
        return bool(values) and all(process_scaled(v, index, depth + 1) for v in values)
    return False


def per_process_count(expr: cst.BaseExpression, index: Index, seen: frozenset[str] = frozenset()) -> bool:
    """``expr`` counts per process, as a setting does (``cfg.steps``, ``args.max_train_steps``,
    ``self._config.optimization.steps``, or a name the file binds only to such counts): no
    ``len(...)`` of anything (a loader's length before ``prepare`` counts the global batches), no
    process count, no name the file does not bind (a parameter whose caller's count is unknown).
    ``seen``: the short names being read, outside in."""
    if len(seen) > 3:
        return False
    for node in walk(expr):
        if isinstance(node, cst.Call) and last_part(func_name(node) or "") not in _CASTS:
            return False  # `len(loader)`, `params.pop("T_0", steps // 4)`: not a plain count
        if isinstance(node, cst.Attribute) and node.attr.value in ("num_processes", "world_size"):
            return False
    for name in names_in(expr):
        short = last_part(name)
        if short in seen or name in _CASTS or name == "math":
            continue  # `steps = self._config.optimization.steps` read back as `steps`
        values = index.values.get(short, [])
        # a setting (`args.max_train_steps`) may be given as it is; if the file also works it out
        # (`args.max_train_steps = epochs * len(loader) // N`), every value it gives must count alike
        if (values or "." not in name) and not (values and all(per_process_count(v, index, seen | {short})
                                                               for v in values)):
            return False
    return bool(names_in(expr)) or isinstance(expr, (cst.Integer, cst.Float))  # `steps: int = 2000`


_CASTS = ("int", "round", "ceil", "floor")
