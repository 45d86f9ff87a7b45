"""A loop that back-propagates per task, followed by the step's zeroing and a fresh backward that
feeds the step (MAML's meta-update), is no accumulation window of that step: not LC102. Without the
zeroing, the loop's gradients reach the step and it is LC102."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC102" / "maml_task_backward_then_meta_step.py"
SECOND_ORDER_ZERO = "        model.train()\n        optimiser.zero_grad()\n        meta_batch_loss"
FIRST_ORDER_ZERO = "            model.train()\n            optimiser.zero_grad()\n"


def _lc102(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC102"])]


def _task_backward(source: str) -> int:
    return source.splitlines().index("        loss.backward(retain_graph=True)") + 1


def test_task_backward_wiped_before_the_meta_step_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert SECOND_ORDER_ZERO in source and FIRST_ORDER_ZERO in source
    assert _lc102(source) == []


def test_without_the_zeroing_the_task_gradients_reach_the_step() -> None:
    source = FIXTURE.read_text().replace(SECOND_ORDER_ZERO, "        model.train()\n        meta_batch_loss")
    assert _lc102(source) == [_task_backward(source)]


def test_zeroing_before_the_task_loop_does_not_wipe_it() -> None:
    source = FIXTURE.read_text().replace(SECOND_ORDER_ZERO, "        model.train()\n        meta_batch_loss").replace(
        "    task_losses = []\n", "    task_losses = []\n    optimiser.zero_grad()\n", 1)
    assert _lc102(source) == [_task_backward(source)]
