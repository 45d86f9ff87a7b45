"""A step that only creates an optimizer's state: under a test that the state is still empty
(`if len(state_dict["state"]) == 0:`, `if not optimizer.state:`) a helper sets the gradients to zeros
and steps once, so that there is a state to broadcast (horovod's `broadcast_optimizer_state`). It
never runs after a training step and trains nothing: it is no second step (LC109) and its zeroing
is no zeroing before a step (LC104), in a helper of the file or of another module. A step in the
`else:` of such a test, or under a test of something else, is still a step."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project.facts import extract
from loopcheck.project.state_init import empty_state_test
from tests.projects import write_project

HELPER = """
    def broadcast_optimizer_state(optimizer, root_rank):
        state_dict = optimizer.state_dict()
        if GUARD:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    p.grad = p.data.new(p.size()).zero_()
            optimizer.step()
            state_dict = optimizer.state_dict()
        return state_dict
"""

LOOP = """
    import torch
    import torch.nn.functional as F
    import helpers as hvd


    def check(x, y, optimizers, create_model):
        for opt_class in optimizers:
            model, optimizer = create_model(opt_class)
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
"""


def _helper(guard: str) -> str:
    return textwrap.dedent(HELPER).replace("GUARD", guard)


@pytest.mark.parametrize("test", ["len(state_dict['state']) == 0", "not optimizer.state",
                                  "len(optimizer.state_dict()[\"state\"]) < 1", "not len(self.optimizer.state)",
                                  "optimizer.state == {}"])
def test_tests_that_the_state_is_empty(test: str) -> None:
    assert empty_state_test(test)


@pytest.mark.parametrize("test", ["len(state_dict['state']) > 0", "optimizer.state", "not args.state",
                                  "len(state) == 0", "len(opt.state[p]) == 0", "first_step"])
def test_other_tests(test: str) -> None:
    assert not empty_state_test(test)


def test_a_helper_steps_its_argument_only_outside_a_state_initialisation() -> None:
    assert extract(_helper("len(state_dict['state']) == 0"), "helpers.py").functions[
        "broadcast_optimizer_state"].steps == ()
    assert extract(_helper("root_rank == 0"), "helpers.py").functions["broadcast_optimizer_state"].steps == (0,)


def _codes(run_cli, path: str) -> list[str]:
    code, out, _ = run_cli("check", "--output-format", "concise", "--no-cache", path)
    return [line for line in out.splitlines() if " LC" in line]


def test_a_state_initialising_helper_of_another_module_is_no_second_step(project: Path, run_cli) -> None:
    write_project(project, {"helpers.py": HELPER.replace("GUARD", "len(state_dict['state']) == 0"),
                            "test_opt.py": LOOP})
    assert _codes(run_cli, "test_opt.py") == []
    write_project(project, {"helpers.py": HELPER.replace("GUARD", "root_rank == 0")})
    found = _codes(run_cli, "test_opt.py")
    assert len(found) == 1 and found[0].startswith("test_opt.py:14:") and " LC109 " in found[0]


def test_the_else_of_an_empty_state_test_still_steps() -> None:
    import libcst as cst

    from loopcheck.model import Kind, build

    source = textwrap.dedent("""
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            if not optimizer.state:
                optimizer.step()
            else:
                optimizer.step()
    """)
    loop = build(cst.parse_module(source), source).training_loops[0].step_loop
    assert [s.conds[0].negated for s in loop.events(Kind.STEP, deep=True)] == [True]
