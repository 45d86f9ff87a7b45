"""An EMA updated on every micro-batch of a loop whose loss-scaling helper (another module's
``loss_scaler(loss, optimizer, ...)``) is told the loop counter and the zeroing runs under a window
test on it: the helper steps once per window, so the EMA runs N times per step (LC401). Where the
helper is not told the iteration, or the file's own ``__call__`` steps on every call, or the loop
zeroes on every iteration, nothing says the helper holds its step back."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

ROOT = Path(__file__).resolve().parent.parent
TRUE = (ROOT / "rules" / "fixtures" / "LC401" / "ema_per_micro_batch_behind_a_loss_scaler_told_the_iteration.py").read_text()
EMA_LINE = next(n for n, line in enumerate(TRUE.splitlines(), 1) if "# LC401" in line)


def lc401(source: str) -> list[int]:
    return [f.line for f in check_source(source, "engine_accum.py", select=["LC401"])]


def test_told_the_iteration_with_windowed_zeroing() -> None:
    assert lc401(TRUE) == [EMA_LINE]


def test_not_told_the_iteration() -> None:
    assert lc401(TRUE.replace("        loss_scaler.set_iters(ii)\n", "")) == []


def test_told_something_else() -> None:
    assert lc401(TRUE.replace("loss_scaler.set_iters(ii)", "loss_scaler.set_iters(0)")) == []


def test_zeroing_on_every_iteration() -> None:
    source = TRUE.replace("        if (ii + 1) % 4 == 0:\n            optimizer.zero_grad()\n",
                          "        optimizer.zero_grad()\n")
    assert source != TRUE
    assert lc401(source) == []


def test_a_helper_of_this_file_that_steps_on_every_call() -> None:
    helper = ("class Scaler:\n    def set_iters(self, i):\n        self.i = i\n\n"
              "    def __call__(self, loss, optimizer, clip_grad=None, parameters=None):\n"
              "        loss.backward()\n        optimizer.step()\n\n\n")
    assert lc401(TRUE.replace("def train_one_epoch_4", helper + "def train_one_epoch_4", 1)) == []
