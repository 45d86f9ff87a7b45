"""LC501 across a class hierarchy split over two modules: the base class wraps the model in DDP and a
subclass of another module accumulates without `no_sync()`, or the subclass (another module) wraps
and the base class's loop accumulates. The finding points at the loop and names the other file
and line; it works on the changed file alone (pre-commit) and with the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC501", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


WRAPPING_BASE = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    class BaseTrainer:
        def __init__(self, model, rank, accum):
            self.model = DDP(model, device_ids=[rank])
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.accum = accum
"""

ACCUMULATING_SUB = """
    from trainers.base import BaseTrainer


    class Trainer(BaseTrainer):
        def train_epoch(self, loader):
            for i, (x, y) in enumerate(loader):
                loss = self.model(x).sum() / self.accum
                loss.backward()
                if (i + 1) % self.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""


def test_a_base_class_of_another_module_wraps_the_model(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": WRAPPING_BASE, "trainers/sub.py": ACCUMULATING_SUB})
    found = _codes(run_cli, "trainers/sub.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("trainers/sub.py:9:")
    assert "(by the base class, trainers/base.py:8)" in found[0]


@pytest.mark.parametrize("base", [
    # the base module controls the sync (a helper the subclass may call)
    WRAPPING_BASE + "\n    def sync_context(self, last):\n        return nullcontext() if last else self.model.no_sync()\n",
    # the wrap is in another class of the module
    WRAPPING_BASE.replace("self.model = DDP(model, device_ids=[rank])", "self.model = model")
    + "\n\nclass Launcher:\n    def wrap(self, model):\n        return DDP(model)\n",
    # no DDP at all
    WRAPPING_BASE.replace("DDP(model, device_ids=[rank])", "model"),
])
def test_a_base_class_that_does_not_wrap_or_controls_the_sync(project: Path, run_cli, base: str) -> None:
    write_project(project, {"trainers/base.py": base, "trainers/sub.py": ACCUMULATING_SUB})
    assert _codes(run_cli, "trainers/sub.py") == []


def test_a_loop_outside_the_subclass_is_not_read_as_wrapped(project: Path, run_cli) -> None:
    other = ACCUMULATING_SUB.replace("class Trainer(BaseTrainer):", "class Trainer:")
    write_project(project, {"trainers/base.py": WRAPPING_BASE, "trainers/sub.py": other})
    assert _codes(run_cli, "trainers/sub.py") == []


def test_a_base_class_that_stops_wrapping_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": WRAPPING_BASE, "trainers/sub.py": ACCUMULATING_SUB})
    assert len(_codes(run_cli, "trainers/sub.py")) == 1
    write_project(project, {"trainers/base.py": WRAPPING_BASE.replace("DDP(model, device_ids=[rank])", "model")})
    assert _codes(run_cli, "trainers/sub.py") == []


ACCUMULATING_BASE = """
    import torch


    class BaseTrainer:
        def __init__(self, args):
            self.args = args
            self.model = self.build_model()
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def train_epoch(self, loader):
            for i, (x, y) in enumerate(loader):
                loss = self.model(x).sum() / self.args.accum
                loss.backward()
                if (i + 1) % self.args.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""

WRAPPING_SUB = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from trainers.base import BaseTrainer


    class Trainer(BaseTrainer):
        def build_model(self):
            return DDP(torch.nn.Linear(4, 2))
"""


def test_a_subclass_of_another_module_wraps_the_model(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": ACCUMULATING_BASE, "trainers/sub.py": WRAPPING_SUB})
    found = _codes(run_cli, "trainers/base.py")  # only the changed file
    assert len(found) == 1 and found[0].startswith("trainers/base.py:14:")
    assert "(by trainers/sub.py:10)" in found[0]


def test_a_subclass_that_stops_wrapping_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": ACCUMULATING_BASE, "trainers/sub.py": WRAPPING_SUB})
    assert len(_codes(run_cli, "trainers/base.py")) == 1
    unwrapped = WRAPPING_SUB.replace("DDP(torch.nn.Linear(4, 2))", "torch.nn.Linear(4, 2)")
    write_project(project, {"trainers/sub.py": unwrapped})
    assert _codes(run_cli, "trainers/base.py") == []


def test_a_subclass_that_wraps_nothing_of_the_base_module(project: Path, run_cli) -> None:
    # the DDP file imports the base module's class but neither calls nor subclasses it
    sub = WRAPPING_SUB.replace("class Trainer(BaseTrainer):", "class Trainer:") + "\n\nKINDS = [BaseTrainer]\n"
    write_project(project, {"trainers/base.py": ACCUMULATING_BASE, "trainers/sub.py": sub})
    assert _codes(run_cli, "trainers/base.py") == []
