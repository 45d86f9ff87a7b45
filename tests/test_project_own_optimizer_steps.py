"""A method of another project module that clears and steps an optimizer its class builds itself
(DARTS's `Architect.step`: Adam over the architecture parameters) is a whole step of that optimizer:
its zeroing clears none of the gradients the caller's own optimizer accumulates. One handed to the
constructor may be the caller's optimizer, so its zeroing still counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

ARCHITECT = """
    import torch


    class Architect:
        def __init__(self, model, OPTIMIZER_PARAM):
            self.model = model
            self.optimizer = OPTIMIZER

        def step(self, x_valid, y_valid):
            self.optimizer.zero_grad()
            loss = self.model.loss(x_valid, y_valid)
            loss.backward()
            self.optimizer.step()
"""
SEARCH = """
    import torch
    from architect import Architect


    def train(model, loader, valid, optimizer, arch_optimizer, accum_steps):
        architect = Architect(model, arch_optimizer)
        for i, (x, y) in enumerate(loader):
            x_valid, y_valid = next(valid)
            architect.step(x_valid, y_valid)
            loss = model.loss(x, y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()
"""


def _found(run_cli) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--no-cache", ".")
    return [line for line in out.splitlines() if " LC" in line]


def test_a_callee_stepping_the_optimizer_its_class_builds_clears_only_that_one(project: Path, run_cli) -> None:
    optimizer = "torch.optim.Adam(model.arch_parameters(), lr=3e-4)"
    write_project(project, {"architect.py": ARCHITECT.replace("OPTIMIZER_PARAM", "args").replace("OPTIMIZER", optimizer),
                            "search.py": SEARCH})
    assert _found(run_cli) == []


@pytest.mark.parametrize("handed", [True, False])
def test_a_callee_zeroing_an_optimizer_it_was_handed_or_does_not_step_still_zeroes(project: Path, run_cli,
                                                                                   handed: bool) -> None:
    architect = ARCHITECT.replace("OPTIMIZER_PARAM", "optimizer").replace("OPTIMIZER", "optimizer") if handed else \
        ARCHITECT.replace("OPTIMIZER_PARAM", "args").replace("OPTIMIZER", "torch.optim.Adam(model.parameters())") \
        .replace("            self.optimizer.step()\n", "")
    write_project(project, {"architect.py": architect, "search.py": SEARCH})
    found = _found(run_cli)
    assert len(found) == 1 and found[0].startswith("search.py:10:") and " LC101 " in found[0], found


def test_fixing_keeps_a_finding_that_rests_on_another_module_and_moves_no_helper_call(project: Path,
                                                                                      run_cli) -> None:
    # `--fix` checks each file with the facts of the modules it imports, as the plain check does, and
    # caches that result: neither the fix run nor the check after it may lose the finding
    architect = ARCHITECT.replace("OPTIMIZER_PARAM", "optimizer").replace("OPTIMIZER", "optimizer")
    write_project(project, {"architect.py": architect, "search.py": SEARCH})
    before = (project / "search.py").read_text()
    code, out, _ = run_cli("check", "-q", "--no-show-source", "--fix", ".")
    assert code == 1 and " LC101 " in out and "search.py:10:" in out, out
    assert (project / "search.py").read_text() == before  # moving `architect.step(...)` would move its step too
    code, out, _ = run_cli("check", "-q", "--no-show-source", ".")
    assert code == 1 and " LC101 " in out and "[*]" not in out, out
