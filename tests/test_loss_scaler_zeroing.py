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


WINDOWED = Path(__file__).parent / "fixtures" / "must_not_flag" / "loss_scaler_helper_told_the_iteration_steps_per_window.py"
_HELPER = '''

class AccumulativeScaler:
    def __init__(self, forward_time=4):
        self._scaler = torch.amp.GradScaler("cuda")
        self.forward_time = forward_time

    def set_iters(self, iteration):
        self.iteration = iteration

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
        self._scaler.scale(loss).backward()
        if (self.iteration + 1) % self.forward_time == 0:
            self._scaler.step(optimizer)
            self._scaler.update()
'''


def test_a_helper_told_the_iteration_may_step_only_where_the_loop_zeroes() -> None:
    # ViTs-vs-CNNs: `loss_scaler.set_iters(ii)`, then the helper steps when `(ii + 1) % 4 == 0`
    source = WINDOWED.read_text()
    assert lc103(source) == []
    # the same helper in this file: its step under a test is read as such
    assert lc103(source + _HELPER) == []
    # a helper out of sight that is not told the iteration steps on every call (timm's NativeScaler)
    untold = source.replace("        loss_scaler.set_iters(ii)\n", "")
    assert untold != source
    assert lc103(untold) == [20]
    # a helper of this file that steps on every call
    every_call = source + _HELPER.replace("        if (self.iteration + 1) % self.forward_time == 0:\n"
                                          "            self._scaler.step(optimizer)\n            self._scaler.update()\n",
                                          "        self._scaler.step(optimizer)\n        self._scaler.update()\n")
    assert "if (self.iteration" not in every_call
    assert lc103(every_call) == [21]
