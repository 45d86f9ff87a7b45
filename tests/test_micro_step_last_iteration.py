"""An inner loop of N micro-steps that steps on its last iteration (``for i in range(N): ...
backward(); if i == N - 1: step()``) is a window of N micro-batches, read as ``(i + 1) % N == 0``
would be: the accumulation rules give what they give for the same loop with the step after it.
Only in a micro-step loop: not over the data (``i == len(loader) - 1`` is an epoch's last batch),
and nested in another loop or counting an accumulation by name."""

from __future__ import annotations

import libcst as cst
import pytest

from loopcheck.engine import check_source
from loopcheck.model import Style, build

HEAD = """import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, optimizer, it, total_steps, grad_accum, chunks):
    model = DDP(model)
    for step in range(total_steps):
"""
BODY = """            x, y = next(it)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""
STEP = "optimizer.step()\n{indent}optimizer.zero_grad()\n"


def _inline(loop: str, test: str) -> str:
    return HEAD + f"        {loop}:\n" + BODY + f"            if {test}:\n                " \
        + STEP.format(indent="                ")


def _after(loop: str) -> str:
    return HEAD + f"        {loop}:\n" + BODY + "        " + STEP.format(indent="        ")


def _found(source: str) -> list[tuple[int, str]]:
    return sorted((f.line, f.code) for f in check_source(source))


FORMS = [
    ("for i in range(grad_accum)", "i == grad_accum - 1"),
    ("for i in range(grad_accum)", "i + 1 == grad_accum"),
    ("for i in range(grad_accum)", "grad_accum - 1 == i"),
    ("for i in range(grad_accum)", "i >= grad_accum - 1"),
    ("for i in range(grad_accum)", "(i + 1) % grad_accum == 0"),
    ("for i, chunk in enumerate(chunks)", "i == len(chunks) - 1"),
    ("for i in range(len(chunks))", "i + 1 == len(chunks)"),
]


@pytest.mark.parametrize(("loop", "test"), FORMS)
def test_step_on_the_last_iteration_reads_as_the_step_after_the_loop(loop: str, test: str) -> None:
    found = _found(_inline(loop, test))
    assert {code for _, code in found} == {"LC102", "LC107", "LC501"}
    assert found == _found(_after(loop))


def test_the_window_is_the_inner_loop() -> None:
    source = _inline("for i, chunk in enumerate(chunks)", "i == len(chunks) - 1")
    [training] = build(cst.parse_module(source)).training_loops
    assert training.style is Style.GUARDED
    assert cst.Module([]).code_for_node(training.modulus) == "len(chunks)"


def test_every_iteration_but_the_last_is_its_complement() -> None:
    source = _inline("for i in range(grad_accum)", "i == grad_accum - 1").replace(
        "            loss.backward()\n",
        "            if i < grad_accum - 1:\n                with model.no_sync():\n                    loss.backward()\n"
        "            else:\n                loss.backward()\n").replace(
        "            x, y = next(it)\n            loss = torch.nn.functional.mse_loss(model(x), y)\n", "")
    source = source.replace("            if i < grad_accum - 1:", "            x, y = next(it)\n"
                            "            if i < grad_accum - 1:").replace(
        "                with model.no_sync():\n                    loss.backward()\n",
        "                with model.no_sync():\n                    loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "                    loss.backward()\n").replace(
        "            else:\n                loss.backward()\n",
        "            else:\n                loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "                loss.backward()\n")
    assert "LC501" not in {code for _, code in _found(source)}


NOT_MICRO_STEPS = [
    # the last batch of an epoch: the loop goes over the data
    ("def train(model, optimizer, loader, epochs):\n    for epoch in range(epochs):\n"
     "        for i in range(len(loader)):\n            x, y = loader[i]\n", "i == len(loader) - 1"),
    # the last iteration of a whole run, in no other loop, counting no accumulation
    ("def train(model, optimizer, it, max_iters):\n    if True:\n"
     "        for i in range(max_iters):\n            x, y = next(it)\n", "i == max_iters - 1"),
    # the index is moved inside the loop
    ("def train(model, optimizer, it, epochs, grad_accum):\n    for epoch in range(epochs):\n"
     "        for i in range(grad_accum):\n            x, y = next(it)\n            i = i * 2\n", "i == grad_accum - 1"),
]


@pytest.mark.parametrize(("head", "test"), NOT_MICRO_STEPS)
def test_not_read_outside_a_micro_step_loop(head: str, test: str) -> None:
    source = "import torch\n\n\n" + head + "            loss = torch.nn.functional.mse_loss(model(x), y)\n" \
        "            loss.backward()\n" + f"            if {test}:\n                optimizer.step()\n" \
        "                optimizer.zero_grad()\n"
    assert all(t.style is not Style.GUARDED for t in build(cst.parse_module(source)).training_loops)
    assert _found(source) == []


def test_a_step_function_counting_its_chunks() -> None:
    """A method with no loop around it, whose count names its chunks (llm-random's shape)."""
    source = ("import torch\n\n\nclass Trainer:\n    def step(self, batch):\n"
              "        for i in range(self.n_chunks):\n"
              "            loss = torch.nn.functional.cross_entropy(self.model(batch[i][0]), batch[i][1])\n"
              "            loss.backward()\n            if i == self.n_chunks - 1:\n"
              "                self.optimizer.step()\n                self.optimizer.zero_grad()\n")
    assert [(f.line, f.code) for f in check_source(source)] == [(8, "LC102")]


FIELD_CLASS = """import attr
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


@attr.s(auto_attribs=True)
class Trainer:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    gradient_accumulation_steps: int = 1

    def train(self, it, n_steps):
        self.model = DDP(self.model)
        for step in range(n_steps):
            for i in range(self.gradient_accumulation_steps):
                loss = self.model(next(it)) / self.gradient_accumulation_steps
                loss.backward()
                if (i + 1) % self.gradient_accumulation_steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""


def test_a_field_default_of_one_is_what_the_constructor_overrides() -> None:
    """``gradient_accumulation_steps: int = 1`` in an attrs or dataclass class is the constructor's
    default, not the count as the file ships it: the accumulation rules still read the loop."""
    assert [(f.line, f.code) for f in check_source(FIELD_CLASS)] == [(17, "LC501")]
    plain = FIELD_CLASS.replace("@attr.s(auto_attribs=True)\n", "")
    assert check_source(plain) == []  # a class attribute set to 1 is the count


def test_beside_a_periodic_test_it_is_the_last_batch() -> None:
    """``(mi + 1) % accum == 0 or mi == len(micro_batches) - 1``: windows of ``accum`` over a list of
    micro-batches, the last (partial) one stepped too; not one window of the whole list."""
    source = ("import torch\n\n\ndef train(model, optimizer, loader, epochs, accum):\n"
              "    for epoch in range(epochs):\n        micro_batches = list(loader)\n"
              "        for mi, (x, y) in enumerate(micro_batches):\n"
              "            loss = torch.nn.functional.mse_loss(model(x), y)\n            loss.backward()\n"
              "            if (mi + 1) % accum == 0 or mi == len(micro_batches) - 1:\n"
              "                optimizer.step()\n                optimizer.zero_grad()\n")
    [training] = build(cst.parse_module(source)).training_loops
    assert training.style is Style.GUARDED and training.step_guard is not None
    assert cst.Module([]).code_for_node(training.modulus) == "accum" and training.step_guard.flush is True


def test_a_loop_that_does_not_step_is_no_such_window() -> None:
    """A PGD attack loop (UER-py's fine-tuning): ``if t != K - 1: model.zero_grad()`` on every attack
    step but the last, whose backward adds to the restored gradients, then one step after the loop.
    The loop steps nothing itself: its last-iteration test is not read as a window boundary (not LC101)."""
    source = ("import torch\n\n\ndef train(model, optimizer, loader, adv, K):\n"
              "    for x, y in loader:\n        loss = torch.nn.functional.mse_loss(model(x), y)\n"
              "        loss.backward()\n        adv.backup_grad()\n        for t in range(K):\n"
              "            adv.attack(is_first_attack=(t == 0))\n            if t != K - 1:\n"
              "                model.zero_grad()\n            else:\n                adv.restore_grad()\n"
              "            loss_adv = torch.nn.functional.mse_loss(model(x), y)\n            loss_adv.backward()\n"
              "        adv.restore()\n        optimizer.step()\n        model.zero_grad()\n")
    assert [f.code for f in check_source(source)] == []
