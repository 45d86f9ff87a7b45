"""A base class of another module whose step method runs its effects under tests of its own body
(OC20's `_backward`: zeroing under `if N == 1:`, the backward, a nested early return off the
boundary, `scaler.step` or `optimizer.step` in an if/else): the subclass's loop sees each effect
with those tests, so it accumulates. A finding at one of the base method's tests points at the
subclass's call."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from loopcheck.project.facts import extract
from tests.projects import write_project

GATED_BASE = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    class BaseTrainer:
        def __init__(self, model, rank, accum, amp):
            self.model = DDP(model, device_ids=[rank])
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.scaler = torch.amp.GradScaler("cuda") if amp else None
            self.accum = accum
            self.step = 0

        def _backward(self, loss):
            if self.accum == 1:
                self.optimizer.zero_grad()
            loss.backward()
            if self.accum != 1:
                if self.step % self.accum != 0:
                    return
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            if self.accum != 1:
                if self.step % self.accum == 0:
                    self.optimizer.zero_grad()
"""

SUB = """
    from trainers.base import BaseTrainer


    class Trainer(BaseTrainer):
        def train(self, loader, epochs):
            for epoch in range(epochs):
                for i, (x, y) in enumerate(loader):
                    self.step = epoch * len(loader) + i + 1
                    loss = self.model(x).sum() / self.accum
                    self._backward(loss)
"""


def _found(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--extend-select", "ALL", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


def test_the_base_methods_effects_keep_their_tests() -> None:
    tree = ast.parse(textwrap.dedent(GATED_BASE))
    method = extract(textwrap.dedent(GATED_BASE), "base.py", tree=tree).classes["BaseTrainer"]["_backward"]
    assert method.own_partial  # what runs on every call is not the whole story
    kinds = [(kind, what, scaler, tuple((test, negated, branch) for test, negated, _, branch in gates))
             for kind, what, scaler, gates in method.gated]
    exit_gate = ("(self.accum != 1) and (self.step % self.accum != 0)", True, "after-exit")
    assert kinds == [
        ("zero", "self.optimizer", "", (("self.accum == 1", False, "body"),)),
        ("backward", "0", "", ()),
        ("step", "self.optimizer", "self.scaler", (exit_gate, ("self.scaler", False, "body"))),
        ("update", "self.scaler", "", (exit_gate, ("self.scaler", False, "body"))),
        ("step", "self.optimizer", "", (exit_gate, ("self.scaler", True, "orelse"))),
        ("zero", "self.optimizer", "", (exit_gate, ("self.accum != 1", False, "body"),
                                        ("self.step % self.accum == 0", False, "body"))),
    ]


@pytest.mark.parametrize("change", [
    ("            loss.backward()\n", "            for part in loss:\n                part.backward()\n"),  # in a loop
    ("                    return\n", "                    return None if self.step else 0\n"),  # a value returned
    ("            else:\n                self.optimizer.step()\n",
     "            else:\n                try:\n                    self.optimizer.step()\n                except RuntimeError:\n"
     "                    pass\n"),
])
def test_effects_the_tests_cannot_say_leave_the_call_unread(change: tuple[str, str]) -> None:
    source = textwrap.dedent(GATED_BASE.replace(*change))
    assert GATED_BASE.replace(*change) != GATED_BASE
    method = extract(source, "base.py", tree=ast.parse(source)).classes["BaseTrainer"]["_backward"]
    assert method.own_partial and method.gated == ()


def test_a_subclass_loop_accumulates_through_the_gated_base_method(project: Path, run_cli) -> None:
    write_project(project, {"trainers/base.py": GATED_BASE, "trainers/sub.py": SUB})
    found = _found(run_cli, "trainers/sub.py")
    assert len(found) == 1 and found[0].startswith("trainers/sub.py:11:") and " LC501 " in found[0]


def test_a_finding_at_the_base_methods_test_points_at_the_call(project: Path, run_cli) -> None:
    # a 0-based per-epoch count: the boundary test of the base method fires on the wrong micro-batch
    write_project(project, {"trainers/base.py": GATED_BASE,
                     "trainers/sub.py": SUB.replace("epoch * len(loader) + i + 1", "i")})
    found = _found(run_cli, "trainers/sub.py")
    assert [line.split(" ")[0:2] for line in found] == [["trainers/sub.py:11:17:", "LC106"],
                                                       ["trainers/sub.py:11:17:", "LC501"]]
    assert "`(self.step % self.accum != 0)`" in found[0]


def test_no_sync_off_the_boundary_is_not_flagged(project: Path, run_cli) -> None:
    sub = SUB.replace("from trainers.base import BaseTrainer", "from contextlib import nullcontext\n\n"
                      "    from trainers.base import BaseTrainer").replace(
        "                    loss = self.model(x).sum() / self.accum\n                    self._backward(loss)\n",
        "                    boundary = self.step % self.accum == 0\n"
        "                    with nullcontext() if boundary else self.model.no_sync():\n"
        "                        loss = self.model(x).sum() / self.accum\n"
        "                        self._backward(loss)\n")
    write_project(project, {"trainers/base.py": GATED_BASE, "trainers/sub.py": sub})
    assert "no_sync" in sub and _found(run_cli, "trainers/sub.py") == []
