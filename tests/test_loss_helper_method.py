"""A trainer class whose loss comes from a method of its own (``loss = self._get_loss(x, target)``,
which runs the model and a criterion and returns the loss) and is back-propagated through a step
method under accumulation. The loss is read as that method's: undivided when the method divides
nothing, unknown (quiet) when it divides or names the accumulation count, and divided where the
caller divides it."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_TRAINER = """
import torch
from torch import nn


class Trainer:
    def __init__(self, model, loader, gradient_acc=4):
        self.model = model
        self.train_loader = loader
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.gradient_acc = gradient_acc
        self._grad_count = 0

    def _fit_epoch(self):
        self.model.train()
        for x, target in self.train_loader:
            batch_loss = CALLER
            self._backprop_step(batch_loss)

    def _backprop_step(self, loss):
        self._grad_count += 1
        loss.backward()
        if self._grad_count == self.gradient_acc:
            self.optimizer.step()
            self.optimizer.zero_grad()
            self._grad_count = 0

    def _get_loss(self, x, target):
        out = self.model(x)
        loss = LOSS
        return loss


if __name__ == "__main__":
    data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(8)]
    Trainer(nn.Linear(3, 1), data)._fit_epoch()
"""


def _source(caller: str, loss: str) -> str:
    return textwrap.dedent(_TRAINER).replace("CALLER", caller).replace("LOSS", loss)


def _codes(source: str) -> list[tuple[int, str]]:
    found = check_text(source, "train.py", resolve(select=["LC102"]))
    return sorted((f.line, f.code) for f in found)


@pytest.mark.parametrize(("caller", "loss", "flagged"), [
    # the method's criterion, undivided: N micro-batch means summed into each step
    ("self._get_loss(x, target)", "self.criterion(out, target)", [(23, "LC102")]),
    ("self._get_loss(x, target)", "self.criterion(out, target).mean()", [(23, "LC102")]),
    # the method divides by the accumulation count: normalised inside
    ("self._get_loss(x, target)", "self.criterion(out, target) / self.gradient_acc", []),
    ("self._get_loss(x, target)", "self.criterion(out, target).div(self.gradient_acc)", []),
    # the caller divides what the method returns
    ("self._get_loss(x, target) / self.gradient_acc", "self.criterion(out, target)", []),
    # the method is told the count: it may divide by it
    ("self._get_loss(x, target, self.gradient_acc)", "self.criterion(out, target)", []),
])
def test_loss_from_a_method_of_the_class(caller: str, loss: str, flagged: list[tuple[int, str]]) -> None:
    assert _codes(_source(caller, loss)) == flagged


def test_the_true_fixture_runs() -> None:
    """The flagged shape is a working script (no fix is offered: the backward sits in another method)."""
    source = _source("self._get_loss(x, target)", "self.criterion(out, target)")
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(source, "train.py", "exec"), namespace)  # noqa: S102
    assert all(f.fix_message is None for f in check_text(source, "train.py", resolve(select=["LC102"])))


def test_a_method_of_another_class_stays_unknown() -> None:
    """``self._get_loss`` defined only in an unrelated class of the file: a base class elsewhere may
    define the one that runs, and divide."""
    source = _source("self._get_loss(x, target)", "self.criterion(out, target)").replace(
        "    def _get_loss(self, x, target):", "class Other:\n    def _get_loss(self, x, target):")
    assert _codes(source) == []
