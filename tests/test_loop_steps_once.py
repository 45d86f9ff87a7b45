"""A micro-batch loop that steps once and ends (GLM's ``while True: ... if count == N: optimizer.step();
complete = True ... if complete: break``) runs once per step: the zeroing before it in its function
clears the gradients between steps."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "micro_batch_loop_steps_once_and_breaks.py"


def lc103(source: str) -> list[int]:
    return [f.line for f in check_source(source, "train_utils.py", select=["LC103"])]


def test_a_loop_that_breaks_after_its_step_is_zeroed_before_it() -> None:
    assert lc103(FIXTURE.read_text()) == []


def test_a_loop_that_keeps_stepping_is_not_cleared_by_the_zeroing_before_it() -> None:
    source = FIXTURE.read_text().replace("            if complete:\n                break\n", "")
    assert "if complete:\n" not in source
    assert lc103(source) == [34]


def test_a_flag_the_loop_never_breaks_on_clears_nothing() -> None:
    source = FIXTURE.read_text().replace("if complete:\n                break", "if args.single_step:\n                break")
    assert "if complete:\n" not in source
    assert lc103(source) == [34]


def test_a_break_right_after_the_step() -> None:
    source = """
def train_step(model, optimizer, batches, n):
    optimizer.zero_grad()
    count = 0
    while True:
        loss = model(next(batches)).mean() / n
        loss.backward()
        count += 1
        if count == n:
            optimizer.step()
            break
"""
    assert lc103(source) == []
    assert lc103(source.replace("            break\n", "")) == [10]
