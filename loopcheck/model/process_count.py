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
one: ``per_process_count`` never reads a ``len(...)``. Taken after ``prepare`` (``model, optimizer,
train_dataloader = accelerator.prepare(...)`` and then ``math.ceil(len(train_dataloader) / N)``), it
counts one process's batches: ``sharded_length`` reads that, by the order of the file's code.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from loopcheck.model.accelerate import accelerator_calls
from loopcheck.model.horizon import times_processes
from loopcheck.model.syntax import dotted, func_name, last_part, method, names_in, walk
from loopcheck.patterns import Pattern

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
_DEVICES = Pattern(r"world|gpu|process|device|node|rank|replica|shard", re.I)


def sharded_length(expr: cst.BaseExpression, constructor: cst.Call, model: FileModel) -> str | None:
    """The loader whose length ``expr`` counts, where it counts one process's batches: every ``len(X)``
    it is built from (directly or through every value of the names it reads) is the length of a loader
    the file hands to ``accelerator.prepare``, taken after that ``prepare`` call in the file's order, as is
    the scheduler's ``constructor``; the other parts are counts as ``per_process_count`` reads them (no
    other call, no name the file does not bind, no process count). None otherwise (a name bound before
    ``prepare`` anywhere, the diffusers scripts' global count, silences it)."""
    lengths: list[cst.Call] = []
    if not _lengths(expr, model.index, lengths, frozenset()) or not lengths:
        return None
    order: dict[int, int] | None = None
    loader = None
    for length in lengths:
        loader = dotted(length.args[0].value)
        if loader is None or not model.roles.is_prepared(loader):
            return None
        prepares = [call for call in model.index.calls if (called := method(call)) is not None and called[1] == "prepare"
                    and any(dotted(a.value) is not None and last_part(dotted(a.value) or "") == last_part(loader)
                            for a in call.args)]
        if not prepares:
            return None
        if order is None:
            order = {id(node): i for i, node in enumerate(walk(model.module, into_functions=True))}
        first = min(order.get(id(call), -1) for call in prepares)
        if first < 0 or not first < order.get(id(length), -1) or not first < order.get(id(constructor), -1):
            return None
    return loader


def _lengths(expr: cst.BaseExpression, index: Index, found: list[cst.Call], seen: frozenset[str]) -> bool:
    """Collect the ``len(X)`` calls ``expr`` is built from into ``found``; False where it holds another
    call, a process count or a name the file does not bind."""
    if len(seen) > 4:
        return False
    measured: set[str | None] = set()  # the loaders measured here: their own values are not counts
    for node in walk(expr):
        if isinstance(node, cst.Call):
            called = last_part(func_name(node) or "")
            if called == "len" and len(node.args) == 1 and dotted(node.args[0].value) is not None:
                found.append(node)
                measured.add(dotted(node.args[0].value))
            elif called not in _CASTS:
                return False
        if isinstance(node, cst.Attribute) and node.attr.value in ("num_processes", "world_size"):
            return False
    for name in names_in(expr):
        short = last_part(name)
        if short in seen or name in measured or short in _CASTS or name in ("math", "len"):
            continue
        if _DEVICES.search(short):
            return False  # `* args.n_gpu`, `* world_size`: the file may count the processes its own way
        values = index.values.get(short, [])
        if not values and "." not in name:
            return False
        if not all(_lengths(v, index, found, seen | {short}) for v in values):
            return False
    return True
