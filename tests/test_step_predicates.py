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
    # an exit returning an expression before a constant return (EIR's should_perform_optimizer_step)
    ("def should_step(iteration, grad_acc_steps):\n    if grad_acc_steps and grad_acc_steps > 1:\n"
     "        return iteration % grad_acc_steps == 0\n    return True\n",
     'should_step(iteration=state["iteration"], grad_acc_steps=n)',
     'not (n and n > 1) or state["iteration"] % n == 0'),
    ("def should_step(i, n):\n    if n > 1:\n        return i % n == 0\n    return False\n", "should_step(k, acc)",
     "acc > 1 and k % acc == 0"),
])
def test_predicate_value_binds_the_arguments(module: str, call: str, expected: str) -> None:
    assert _value(module, call) == expected


@pytest.mark.parametrize("module, call", [
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "self.should_step(i, n)"),  # a method
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "should_step(*args)"),
    ("def should_step(*a):\n    return (a[0] + 1) % a[1] == 0\n", "should_step(i, n)"),
    ("def should_step(i, n):\n    return (i + 1) % n == 0\n", "should_step(i)"),  # n missing
    ("def should_step(i, n):\n    if i < 0:\n        return i\n    return (i + 1) % n == 0\n",
     "should_step(i, n)"),  # an early return of no bool
    ("def should_step(i, n):\n    if i < 0:\n        return True\n    return True\n", "should_step(i, n)"),  # constant
    ("def should_step(i, n):\n    if n > 1:\n        return i % n == 0\n    if n < 0:\n        return i == 0\n"
     "    return True\n", "should_step(i, n)"),  # an expression exit that is not the last one
    ("def should_step(i, n):\n    if i < 0:\n        return True\n    k = i + 1\n    return k % n == 0\n",
     "should_step(i, n)"),  # a name bound after an exit
    ("def should_step(self, i):\n    return (i + 1) % self.n == 0\n", "should_step(i)"),  # a method by plain name
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


def _member_value(module: str, call: str) -> str | None:
    tree = cst.parse_module(module)
    functions: dict[str, list[cst.FunctionDef]] = {}
    for stmt in tree.body:
        for fn in (stmt.body.body if isinstance(stmt, cst.ClassDef) else [stmt]):
            if isinstance(fn, cst.FunctionDef):
                functions.setdefault(fn.name.value, []).append(fn)
    value = predicate_value(cst.parse_expression(call), functions)
    return None if value is None else source(value)


@pytest.mark.parametrize("module, call, expected", [
    # a method: `self` dropped, its attributes kept as the settings they are
    ("class T:\n    def _is_boundary(self, step, max_step):\n"
     "        return step % self.accumulation_steps == 0 or (max_step > 0 and step == max_step)\n",
     "self._is_boundary(k, len(loader))",
     "k % self.accumulation_steps == 0 or (len(loader) > 0 and k == len(loader))"),
    ("class T:\n    @staticmethod\n    def _should_step(batch_idx, total_batches, accumulation_steps):\n"
     "        return (batch_idx + 1) % accumulation_steps == 0 or (batch_idx + 1) == total_batches\n",
     "self._should_step(i, len(loader), n)", "(i + 1) % n == 0 or (i + 1) == len(loader)"),
    # several returns: early `return True` / `return False` exits before the last expression
    ("class T:\n    def _is_boundary(self, step, accumulation_steps):\n        \"\"\"Step now?\"\"\"\n"
     "        if accumulation_steps <= 1:\n            return True\n        return (step + 1) % accumulation_steps == 0\n",
     "self._is_boundary(i, n)", "n <= 1 or (i + 1) % n == 0"),
    ("def should_step(i, n, per_epoch):\n    if n <= 1:\n        return True\n"
     "    if i > 0 and (i + 1) % n == 0:\n        return True\n    if i >= per_epoch - 1:\n        return True\n"
     "    return False\n", "should_step(i, acc, len(dl))",
     "acc <= 1 or ((i > 0 and (i + 1) % acc == 0) or i >= len(dl) - 1)"),
    ("def should_step(i, n):\n    if n is None: return False\n    return (i + 1) % n == 0\n", "should_step(i, acc)",
     "not (acc is None) and (i + 1) % acc == 0"),
])
def test_predicate_value_reads_methods_and_early_exits(module: str, call: str, expected: str) -> None:
    assert _member_value(module, call) == expected


@pytest.mark.parametrize("module, call", [
    ("class T:\n    @property\n    def should_step(self):\n        return self.k % self.n == 0\n", "self.should_step()"),
    ("class T:\n    @classmethod\n    def should_step(cls, i):\n        return i % cls.n == 0\n", "self.should_step(i)"),
    ("class T:\n    @staticmethod\n    def should_step(i, n):\n        return i % n == 0\n", "should_step(i, n)"),
    ("class T:\n    def should_step(self, i):\n        return i % self.n == 0\n", "other.should_step(i)"),
    ("class T:\n    def should_step(self, i):\n        return i % self.n == 0\n\n\nclass U:\n"
     "    def should_step(self, i):\n        return True\n", "self.should_step(i)"),  # two of that name
])
def test_methods_read_only_where_the_text_settles(module: str, call: str) -> None:
    assert _member_value(module, call) is None


_CLASS = """
import torch


class Trainer:
    def __init__(self, model, optimizer, accum):
        self.model, self.optimizer, self.accum = model, optimizer, accum

{helper}

    def train(self, loader, accum, epochs):
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                loss = self.model(x, y) / accum
                loss.backward()
                if {test}:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""


@pytest.mark.parametrize("helper, call, written, codes", [
    ("    def _should_step(self, step, n):\n        if n <= 1:\n            return True\n        return (step + 1) % n == 0",
     "self._should_step(i, accum)", "accum <= 1 or (i + 1) % accum == 0", ["LC105"]),
    ("    def _b(self, i, n):\n        if n <= 1:\n            return True\n        if i > 0 and (i + 1) % n == 0:\n"
     "            return True\n        return False", "self._b(i, accum)", "accum <= 1 or (i > 0 and (i + 1) % accum == 0)",
     ["LC105"]),
    ("    def _b(self, i, n, t):\n        if n <= 1:\n            return True\n        if i > 0 and (i + 1) % n == 0:\n"
     "            return True\n        if i >= t - 1:\n            return True\n        return False",
     "self._b(i, accum, len(loader))", "accum <= 1 or (i > 0 and (i + 1) % accum == 0) or i >= len(loader) - 1", []),
    ("    @staticmethod\n    def _should_step(i, total, n):\n        return (i + 1) % n == 0 or i + 1 == total",
     "self._should_step(i, len(loader), accum)", "(i + 1) % accum == 0 or i + 1 == len(loader)", []),
    ("    def _is_step(self, step, m):\n        return step % self.accum == 0 or (m > 0 and step == m)",
     "self._is_step(i + 1, len(loader))", "(i + 1) % self.accum == 0 or (len(loader) > 0 and i + 1 == len(loader))", []),
    ("    def _is_step(self, step):\n        return (step + 1) % self.accum == 0",
     "self._is_step(i)", "(i + 1) % self.accum == 0", ["LC105"]),
])
def test_a_method_predicate_reads_as_the_condition_written_out(helper: str, call: str, written: str,
                                                               codes: list[str]) -> None:
    called = {(f.line, f.code) for f in check_text(_CLASS.format(helper=helper, test=call), "train.py", resolve())}
    assert called == {(f.line, f.code) for f in check_text(_CLASS.format(helper=helper, test=written), "train.py",
                                                            resolve())}
    assert sorted(code for _, code in called) == codes


def test_a_method_predicate_tail_finding_has_no_fix() -> None:
    helper = "    def _should_step(self, step, n):\n        if n <= 1:\n            return True\n        return (step + 1) % n == 0"
    findings = check_text(_CLASS.format(helper=helper, test="self._should_step(i, accum)"), "train.py", resolve())
    assert [(f.code, f.fix_message) for f in findings] == [("LC105", None)]
