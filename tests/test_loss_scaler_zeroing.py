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


MAE_SCALER = """
    import torch


    class NativeScalerWithGradNormCount:
        def __init__(self):
            self._scaler = torch.cuda.amp.GradScaler()

        def __call__(self, loss, optimizer, clip_grad=None, parameters=None, update_grad=True):
            self._scaler.scale(loss).backward()
            if update_grad:
                self._scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()
"""

MIXFORMER_TRAINER = """
    import torch

    from misc import NativeScalerWithGradNormCount as NativeScaler


    class LTRTrainer:
        def __init__(self, actor, optimizer, accum_iter):
            self.actor, self.optimizer, self.accum_iter = actor, optimizer, accum_iter
            self.loss_scaler = NativeScaler()

        def cycle_dataset(self, loader):
            self.optimizer.zero_grad()
            for data_iter_step, data in enumerate(loader):
                with torch.autocast("cuda"):
                    loss = self.actor(data) / self.accum_iter
                self.loss_scaler(loss, self.optimizer, parameters=self.actor.parameters(), clip_grad=1.0,
                                 update_grad={gate})
                if (data_iter_step + 1) % self.accum_iter == 0:
                    self.optimizer.zero_grad()

        def train(self, loaders, epochs):
            for epoch in range(epochs):
                for loader in loaders:
                    self.cycle_dataset(loader)
"""


def test_a_scaler_of_another_module_told_when_to_step(project: Path, run_cli) -> None:
    # MixFormer's trainer: MAE's scaler, imported from a module of the project, steps only when
    # `update_grad`, which is the zeroing's own test; told nothing (`update_grad=True`), it steps every call
    from tests.projects import write_project

    for gate, found in (("(data_iter_step + 1) % self.accum_iter == 0", 0), ("True", 1)):
        write_project(project, {"misc.py": MAE_SCALER, "trainer.py": MIXFORMER_TRAINER.format(gate=gate)})
        _, out, _ = run_cli("check", "-q", "--no-cache", "--no-show-source", "--select", "LC103", "trainer.py")
        assert len([line for line in out.splitlines() if ": LC103" in line]) == found, (gate, out)
