"""What goes over the data, fresh iterators and the batches taken from them: ``iter(loader)`` and
``loader.__iter__()`` start a new pass over ``loader``; ``next(...)`` / ``.__next__()`` / ``.next()``
take one item from it."""

from __future__ import annotations

import re

import libcst as cst

from loopcheck.model.events import Loop
from loopcheck.model.syntax import func_name, last_part, method, names_in, positional
from loopcheck.patterns import Pattern

# `batch_samples` / `micro_batches` lists are windows of one step, not the data: not data loops.
# fairseq's `epoch_itr.next_epoch_itr()` makes one pass over the data.
_DATA_NAME = Pattern(r"load|(^|_)dl($|_)|dataset|data_iter|(^|_)data$|^next_epoch_itr$", re.I)
# what reads a file (a checkpoint, a config), by its full name: `torch.load(path)` is not a loader
_DESERIALIZERS = frozenset({"torch.load", "json.load", "json.loads", "pickle.load", "pickle.loads", "np.load",
                            "numpy.load", "yaml.load", "yaml.safe_load", "yaml.full_load", "joblib.load"})


def is_data_iterable(iterable: cst.BaseExpression | None) -> bool:
    """``loader`` / ``enumerate(tqdm(train_dl))``: one batch of data per iteration. A deserializer
    (``torch.load``, ``json.load``) reads a file, not the data: ``range(start_epoch, epochs)`` with
    ``start_epoch = checkpoint["epoch"]`` and ``checkpoint = torch.load(path)`` counts epochs."""
    return iterable is not None and any(_DATA_NAME.search(last_part(n)) and n not in _DESERIALIZERS
                                        for n in names_in(iterable))


def is_data_loop(loop: Loop) -> bool:
    """The loop goes over a data loader, itself or through names bound to one before the loop
    (``epoch_iterator = tqdm(train_loader)``; ``for step, batch in enumerate(epoch_iterator)``), or
    over the batches of a collection by number (``for step in range(len(samples) // batch_size):``)."""
    return any(is_data_iterable(e) for e in counted_part(loop.iter)) \
        or any(is_data_iterable(e) for e in loop.iter_sources) or _batch_numbers(loop.iter)


def counted_part(iterable: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """What says what a loop goes over: ``range(start, stop[, step])`` without its start, anything else
    whole. The start of a range is where a resumed run picks up (``range(start_epoch, epochs)`` with
    ``start_epoch = state["epoch"] + 1`` and ``state = torch.load(cfg.LOADCKPT)``, ``range(args.load_epoch,
    n)``): names read there say nothing about the data."""
    if isinstance(iterable, cst.Call) and func_name(iterable) == "range" and not any(a.star for a in iterable.args):
        args = positional(iterable)
        if len(args) >= 2:
            return args[1:]
    return [iterable] if iterable is not None else []


def _batch_numbers(iterable: cst.BaseExpression | None) -> bool:
    """``range(len(xs) // bs)``, ``range(math.ceil(len(xs) / bs))``, ``range(0, len(xs), bs)``: one
    batch of a collection per iteration, its count derived from the collection's length."""
    if iterable is not None and isinstance(iterable, cst.Call) and func_name(iterable) == "enumerate":
        iterable = positional(iterable)[0] if positional(iterable) else None
    if not (isinstance(iterable, cst.Call) and func_name(iterable) == "range"):
        return False
    args = positional(iterable)
    if len(args) == 3:
        return _is_len(args[1]) and not isinstance(args[2], cst.Integer)
    if len(args) != 1:
        return False
    bound = args[0]
    if isinstance(bound, cst.Call) and last_part(func_name(bound) or "") in ("ceil", "int") and positional(bound):
        bound = positional(bound)[0]
    while isinstance(bound, cst.BinaryOperation) and isinstance(bound.operator, (cst.Add, cst.Subtract)) \
            and isinstance(bound.right, cst.Integer):
        bound = bound.left  # `len(xs) // bs + 1`
    return isinstance(bound, cst.BinaryOperation) and isinstance(bound.operator, (cst.FloorDivide, cst.Divide)) \
        and _is_len(bound.left) and not isinstance(bound.right, cst.Integer)


def _is_len(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and func_name(expr) == "len"


def iterated(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``loader`` in ``iter(loader)`` or ``loader.__iter__()``: what a new iterator goes over."""
    if not isinstance(expr, cst.Call):
        return None
    called = method(expr)
    if called is not None:
        return called[0] if called[1] == "__iter__" and not expr.args else None
    args = positional(expr)
    return args[0] if args and func_name(expr) == "iter" else None


def taken_from(call: cst.Call) -> cst.BaseExpression | None:
    """``it`` in ``next(it)``, ``it.__next__()`` or ``it.next()`` (old DataLoader iterators)."""
    called = method(call)
    if called is not None:
        return called[0] if called[1] in ("__next__", "next") and not call.args else None
    args = positional(call)
    return args[0] if args and func_name(call) == "next" else None


def first_batch_of(call: cst.Call) -> cst.BaseExpression | None:
    """``loader`` in ``next(iter(loader))``, ``iter(loader).__next__()``, ``next(loader.__iter__())``:
    one item taken from an iterator made for it."""
    return iterated(taken_from(call))
