"""A loss-scaler helper (``scaler(loss, optimizer, ...)``) owns backward and step; where its code is
out of sight it may zero the gradients too (a ``NativeScalerWithGradAccum`` that calls
``optimizer.zero_grad()`` after its step), so a loop that never zeroes is not flagged for it.
timm's scalers and a helper the file defines without zeroing clear nothing."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "loss_scaler_helper_zeroes_after_its_step.py"
_LOOP = FIXTURE.read_text()[FIXTURE.read_text().index("def train_one_epoch"):]


def lc103(source: str) -> list[int]:
    return [f.line for f in check_source(source, "cls_engine.py", select=["LC103"])]


def test_a_helper_of_this_file_that_zeroes() -> None:
    assert lc103(FIXTURE.read_text()) == []


def test_a_helper_passed_in_from_another_module() -> None:
    assert lc103("import torch\n\n\n" + _LOOP) == []


def test_a_helper_of_this_file_that_does_not_zero() -> None:
    source = FIXTURE.read_text().replace("            optimizer.zero_grad()\n            if scheduler:\n",
                                         "            if scheduler:\n", 1)
    assert source.count("zero_grad") == FIXTURE.read_text().count("zero_grad") - 1
    assert lc103(source) == [30]  # the AMP branch's `scaler(...)` call


def test_timm_scalers_clear_nothing() -> None:
    assert lc103("import torch\nfrom timm.utils import NativeScaler\n\n\n" + _LOOP) == [12]
