"""Step conditions that call a predicate of the file, and micro-steps that draw from a loader's iterator."""

from __future__ import annotations

import libcst as cst
import pytest

from loopcheck.engine import check_text
from loopcheck.model.predicates import predicate_value
from loopcheck.model.syntax import source
from loopcheck.selection import resolve


def _value(module: str, call: str) -> str | None:
    tree = cst.parse_module(module)
    functions: dict[str, list[cst.FunctionDef]] = {}
    for stmt in tree.body:
        if isinstance(stmt, cst.FunctionDef):
            functions.setdefault(stmt.name.value, []).append(stmt)
    value = predicate_value(cst.parse_expression(call), functions)
    return None if value is None else source(value)


@pytest.mark.parametrize("module, call, expected", [
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "should_step(step, args.accum)",
     "(step + 1) % args.accum == 0"),
    ("def should_step(i, n=4):\n    '''Boundary.'''\n    return (i + 1) % n == 0\n", "should_step(i)", "(i + 1) % 4 == 0"),
    ("def should_step(i, *, n):\n    return (i + 1) % n == 0\n", "should_step(k, n=accum)", "(k + 1) % accum == 0"),
    ("def should_step(batch_index, batch_count, accumulation):\n"
     "    if accumulation < 1:\n        raise ValueError('at least 1')\n"
     "    is_accumulated = (batch_index + 1) % accumulation == 0\n"
     "    is_final = batch_index + 1 == batch_count\n"
     "    return is_accumulated or is_final\n",
     "should_step(j, len(loader), acc)", "(j + 1) % acc == 0 or j + 1 == len(loader)"),
    ("def should_step(i):\n    return (i + 1) % self.every == 0\n", "should_step(b)", "(b + 1) % self.every == 0"),
])
def test_predicate_value_binds_the_arguments(module: str, call: str, expected: str) -> None:
    assert _value(module, call) == expected


@pytest.mark.parametrize("module, call", [
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "self.should_step(i, n)"),  # a method
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "should_step(*args)"),
    ("def should_step(*a):\n    return (a[0] + 1) % a[1] == 0\n", "should_step(i, n)"),
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "should_step(i)"),  # n missing
    ("def should_step(i, n):\n    if i < 0:\n        return False\n    return (i + 1) % n == 0\n",
     "should_step(i, n)"),  # more than one return
    ("def should_step(i, n):\n    return any((j + 1) % n == 0 for j in [i])\n", "should_step(i, n)"),
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n\n\ndef should_step(i):\n    return True\n",
     "should_step(i, n)"),  # two of that name
])
def test_predicate_value_reads_only_what_the_text_settles(module: str, call: str) -> None:
    assert _value(module, call) is None


_LOOP = """
import torch


{helper}


def train(model, loader, optimizer, accum, epochs):
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = model(x, y) / accum
            loss.backward()
            if should_step(i, len(loader), accum):
                optimizer.step()
                optimizer.zero_grad()
"""


def _codes(source_text: str) -> list[str]:
    return [f.code for f in check_text(source_text, "train.py", resolve())]


def test_predicate_without_last_batch_leaves_the_tail() -> None:
    helper = "def should_step(i, n_batches, n):\n    return (i + 1) % n == 0"
    assert _codes(_LOOP.format(helper=helper)) == ["LC105"]


def test_predicate_with_last_batch_steps_the_tail() -> None:
    helper = "def should_step(i, n_batches, n):\n    return (i + 1) % n == 0 or (i + 1) == n_batches"
    assert _codes(_LOOP.format(helper=helper)) == []


def test_predicate_tail_finding_has_no_fix() -> None:
    helper = "def should_step(i, n_batches, n):\n    return (i + 1) % n == 0"
    findings = check_text(_LOOP.format(helper=helper), "train.py", resolve())
    assert [f.fix_message for f in findings] == [None]


_MICRO = """
import torch


def train(model, loader, optimizer, accum, epochs):
    for epoch in range(epochs):
        {iterator} = iter({source})
        for step in range(len(loader) // accum):
            for _ in range(accum):
                x, y = next({iterator})
                loss = model(x, y)
                loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize("iterator, source_, flagged", [
    ("it", "loader", True),  # bound to iter(<loader>) before the loop
    ("data_iter", "loader", True),
    ("chunks", "loader.dataset.tensors", False),  # an iterator over no loader
])
def test_micro_steps_drawing_from_the_loader_are_micro_batches(iterator: str, source_: str, flagged: bool) -> None:
    assert _codes(_MICRO.format(iterator=iterator, source=source_)) == (["LC102"] if flagged else [])


def test_negated_predicate_before_continue_is_read() -> None:
    source_text = """
import torch


def should_step(i, n):
    return (i + 1) % n == 0


def train(model, loader, optimizer, accum, epochs):
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = model(x, y) / accum
            loss.backward()
            if not should_step(i, accum):
                continue
            optimizer.step()
            optimizer.zero_grad()
"""
    findings = check_text(source_text, "train.py", resolve())
    assert [(f.code, f.fix_message) for f in findings] == [("LC105", None)]



_SHARES = """
import torch


def update(actor, dataloader, optimizer, optimizer_step_times):
    dataiter = iter(dataloader)
    for step in range(optimizer_step_times):
        for _iter in range(len(dataloader) // optimizer_step_times):
            trajectory = next(dataiter)
            loss = actor(trajectory).mean()
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

_EPOCHS = """
import torch


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        it = iter(loader)
        for i in range(len(loader)):
            x, y = next(it)
            loss = model(x, y)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_steps_over_shares_of_one_pass_are_no_epoch_step() -> None:
    assert "LC108" not in _codes(_SHARES)


def test_a_whole_pass_drawn_by_next_before_the_step_is_one_step_per_epoch() -> None:
    assert _codes(_EPOCHS) == ["LC108"]


_BODIES = [
    "loss = model(x, y) / accum\n            loss.backward()\n            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
    "loss = model(x, y)\n            loss.backward()\n            optimizer.zero_grad()",
    "loss = model(x, y) / accum\n            loss.backward()\n            scheduler.step()",
]
_WRITTEN = """
import torch


def should_step(i, n, total):
    return (i + 1) % n == 0{flush}


def train(model, loader, optimizer, scheduler, accum, epochs):
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            {body}
            if {test}:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("body", _BODIES)
@pytest.mark.parametrize("flush", ["", " or i + 1 == total"])
def test_a_predicate_reads_as_the_condition_written_out(body: str, flush: str) -> None:
    called = _WRITTEN.format(flush=flush, body=body, test="should_step(i, accum, len(loader))")
    written = _WRITTEN.format(flush=flush, body=body, test="(i + 1) % accum == 0" + flush.replace("total", "len(loader)"))
    findings = {(f.line, f.code) for f in check_text(called, "train.py", resolve())}
    assert findings == {(f.line, f.code) for f in check_text(written, "train.py", resolve())}
