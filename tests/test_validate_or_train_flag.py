"""An epoch helper shared by training and validation: `eval()` under `if not train` and the updates
under `if train`, where the loop never rebinds `train`, cannot meet in one run of the loop: not LC605.
Where the loop rebinds the flag, or the step does not depend on it, the leak is still LC605."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC605" / "epoch_helper_validates_or_trains_by_flag.py"
GUARD = "            if not train and self.valid_apply:\n"
STEP = "            if train:\n                assert self.model.training\n"


def _lc605(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC605"])]


def _eval_line(source: str) -> int:
    return source.splitlines().index("    model.eval()") + 1


def test_evaluation_and_training_under_opposite_values_of_one_flag_are_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert GUARD in source and STEP in source
    assert _lc605(source) == []


def test_a_flag_the_loop_rebinds_is_flagged() -> None:
    source = FIXTURE.read_text().replace(GUARD, "            train = idx % 2 == 0\n" + GUARD)
    assert _eval_line(source) in _lc605(source)


def test_a_step_that_does_not_depend_on_the_flag_is_flagged() -> None:
    source = FIXTURE.read_text().replace(STEP, "            if idx >= 0:\n                assert self.model.training\n")
    assert _eval_line(source) in _lc605(source)

