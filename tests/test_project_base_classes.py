"""Zeroing and stepping in a method of a base class of another project module: ``class
Trainer(BaseTrainer)`` calling ``self.clear_grads()`` or ``self.optimizer_step()`` that only the base
class defines. The base method's effects on the object's optimizers count at the call, in their order;
a finding points at the loop and names the other file and line; a base method that may do more than
its facts say (an effect under a test) leaves the call unread and the rules abstain."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project.facts import extract
from tests.projects import write_project


def _codes(run_cli, *paths: str) -> list[str]:
    code, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


BASE = """
    import torch


    class BaseTrainer:
        def __init__(self, model, optimizer, accum):
            self.model, self.optimizer, self.accum = model, optimizer, accum

        def clear_grads(self):
            self.optimizer.zero_grad()

        def optimizer_step(self):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad()
"""


def _trainer(body: str, base: str = "BaseTrainer") -> str:
    return textwrap.dedent("""
        from trainers.base import BaseTrainer


        class Trainer({base}):
            def train(self, loader):
                for i, (x, y) in enumerate(loader):
        """).format(base=base) + textwrap.indent(textwrap.dedent(body), " " * 12)


ZEROED_EVERY_MICRO_BATCH = _trainer("""
    self.clear_grads()
    loss = ((self.model(x) - y) ** 2).mean() / self.accum
    loss.backward()
    if (i + 1) % self.accum == 0 or i + 1 == len(loader):
        self.optimizer.step()
""")

STEPPED_BY_THE_BASE = _trainer("""
    self.optimizer.zero_grad()
    loss = ((self.model(x) - y) ** 2).mean() / self.accum
    loss.backward()
    if (i + 1) % self.accum == 0 or i + 1 == len(loader):
        self.optimizer_step()
""")

ZEROED_BY_THE_BASE_STEP = _trainer("""
    loss = ((self.model(x) - y) ** 2).mean() / self.accum
    loss.backward()
    if (i + 1) % self.accum == 0 or i + 1 == len(loader):
        self.optimizer_step()
""")

ZEROED_AFTER_THE_STEP = _trainer("""
    loss = ((self.model(x) - y) ** 2).mean()
    loss.backward()
    self.optimizer.step()
    self.clear_grads()
""")

ZEROED_BEFORE_THE_STEP = _trainer("""
    loss = ((self.model(x) - y) ** 2).mean()
    loss.backward()
    self.clear_grads()
    self.optimizer.step()
""")


def test_a_base_class_method_zeroing_every_micro_batch(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": ZEROED_EVERY_MICRO_BATCH})
    found = _codes(run_cli, "trainers/sub.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("trainers/sub.py:9:") and " LC101 " in found[0]
    assert "by `self.clear_grads()`, trainers/base.py:9" in found[0]


def test_a_loop_zeroing_every_micro_batch_before_a_base_class_step(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": STEPPED_BY_THE_BASE})
    found = _codes(run_cli, "trainers/sub.py")
    assert len(found) == 1 and found[0].startswith("trainers/sub.py:9:") and " LC101 " in found[0]


def test_a_base_class_step_that_zeroes_after_stepping_is_right(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": ZEROED_BY_THE_BASE_STEP})
    assert _codes(run_cli, "trainers/sub.py") == []


def test_a_base_class_zeroing_after_the_step_is_a_zeroing(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": ZEROED_AFTER_THE_STEP})
    assert _codes(run_cli, "trainers/sub.py") == []  # was LC103: the zeroing was not seen


def test_a_base_class_zeroing_between_backward_and_step(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": ZEROED_BEFORE_THE_STEP})
    found = _codes(run_cli, "trainers/sub.py")
    assert len(found) == 1 and found[0].startswith("trainers/sub.py:11:") and " LC104 " in found[0]
    assert "trainers/base.py:9" in found[0]


@pytest.mark.parametrize("clear", [
    "if self.step_count % self.accum == 0:\n            self.optimizer.zero_grad()",  # at the window start
    "for p in self.model.parameters():\n            p.grad = None",  # which parameters: not read
    "self.scale_and_zero_grad()",  # a method of a base of the base (not read)
])
def test_a_base_method_that_may_do_more_than_its_facts_say_is_not_read(project: Path, run_cli, clear: str) -> None:
    base = textwrap.dedent(BASE).replace("self.optimizer.zero_grad()\n\n    def optimizer_step",
                                         f"{clear}\n\n    def optimizer_step")
    assert clear in base
    write_project(project, {"trainers/base.py": base, "trainers/sub.py": ZEROED_EVERY_MICRO_BATCH})
    assert _codes(run_cli, "trainers/sub.py") == []
    write_project(project, {"trainers/sub.py": ZEROED_AFTER_THE_STEP})
    assert _codes(run_cli, "trainers/sub.py") == []  # the rules abstain: no LC103 either


def test_a_method_the_class_defines_itself_is_not_the_base_class_one(project: Path, run_cli) -> None:
    own = ZEROED_EVERY_MICRO_BATCH + "\n    def clear_grads(self):\n        print('kept for the window')\n"
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": own})
    found = _codes(run_cli, "trainers/sub.py")
    assert len(found) == 1 and " LC103 " in found[0]  # the override clears nothing


def test_only_a_base_class_of_the_project_is_read(project: Path, run_cli) -> None:
    other = ZEROED_EVERY_MICRO_BATCH.replace("from trainers.base import BaseTrainer",
                                             "from trainers.base import BaseTrainer\nfrom library import Trainer0")
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": other.replace("(BaseTrainer)", "(Trainer0)")})
    assert not any(" LC101 " in line for line in _codes(run_cli, "trainers/sub.py"))


def test_a_base_method_that_stops_zeroing_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": BASE, "trainers/sub.py": ZEROED_AFTER_THE_STEP})
    assert _codes(run_cli, "trainers/sub.py") == []
    changed = textwrap.dedent(BASE).replace("def clear_grads(self):\n        self.optimizer.zero_grad()",
                                            "def clear_grads(self):\n        print('nothing to clear')")
    assert "nothing to clear" in changed
    write_project(project, {"trainers/base.py": changed})
    found = _codes(run_cli, "trainers/sub.py")
    assert len(found) == 1 and " LC103 " in found[0]
    write_project(project, {"trainers/base.py": BASE})
    assert _codes(run_cli, "trainers/sub.py") == []


def test_the_effects_of_a_method_on_its_object_in_order() -> None:
    source = textwrap.dedent("""
        class Engine:
            def step(self, loss):
                self.optimizer.zero_grad()
                with self.timer("backward"):
                    self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.lr_scheduler.step()

            def maybe_step(self):
                if self.ready:
                    self.optimizer.step()

            def wrapped(self):
                self.optimizer_step()

            def optimizer_step(self):
                self.optimizer.step()
                self.optimizer.zero_grad()
    """)
    methods = extract(source, "engine.py").classes["Engine"]
    assert methods["step"].own == (("zero", "self.optimizer", ""), ("backward", "0", "self.scaler"),
                                   ("step", "self.optimizer", "self.scaler"), ("update", "self.scaler", ""))
    assert not methods["step"].own_partial
    assert methods["maybe_step"].own == () and methods["maybe_step"].own_partial
    assert methods["wrapped"].own == (("step", "self.optimizer", ""), ("zero", "self.optimizer", ""))
