"""A submodule of the stepped model zeroed after every backward (``model.teacher.zero_grad()``:
data2vec's EMA teacher) is kept out of the optimizer step on purpose: neither a per-micro-batch
zeroing (LC101) nor gradients cleared before the step (LC104). The whole model, or a part zeroed
before the backward, still is."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "ema_teacher_zeroed_after_each_backward.py"


def findings(source: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(source, "data2vec_pretraining.py", select=["LC101", "LC104"])]


def test_the_teacher_is_kept_out_of_the_step() -> None:
    assert findings(FIXTURE.read_text()) == []


def test_zeroing_the_whole_model_there_still_fires() -> None:
    source = FIXTURE.read_text().replace("model.teacher.zero_grad()", "model.zero_grad()")
    assert findings(source) == [("LC101", 19), ("LC104", 19)]


def test_a_part_zeroed_before_the_backward_loses_its_window() -> None:
    source = FIXTURE.read_text().replace(
        "            # the teacher follows the student by EMA: keep it out of the optimizer step\n"
        "            model.teacher.zero_grad()\n", "").replace(
        "            outputs = model(**batch)\n", "            model.student.zero_grad()\n            outputs = model(**batch)\n")
    assert "model.teacher.zero_grad()\n" not in source
    assert findings(source) == [("LC101", 15)]
