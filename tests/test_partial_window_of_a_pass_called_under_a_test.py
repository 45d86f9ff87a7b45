"""A pass function that zeroes before its loop and is called under a test of its own (`if self.epoch %
loader.epoch_interval == 0: self.cycle_dataset(loader)`, MixFormer's trainer): the zeroing runs whenever
the pass does, so the last partial window of a pass is wiped (dropped), not carried into the next."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_source

TRAINER = textwrap.dedent('''
    import torch


    class Trainer:
        def __init__(self, model, optimizer, loaders, accum_iter):
            self.model, self.optimizer, self.loaders, self.accum_iter = model, optimizer, loaders, accum_iter
            self.epoch = 0

        def cycle_dataset(self, loader):
            self.optimizer.zero_grad()
            for data_iter_step, data in enumerate(loader, 1):
                loss = self.model(data) / self.accum_iter
                loss.backward()
                if (data_iter_step + 1) % self.accum_iter == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()

        def train_epoch(self):
            for loader in self.loaders:
                if self.epoch % loader.epoch_interval == 0:
                    self.cycle_dataset(loader)

        def train(self, epochs):
            for epoch in range(epochs):
                self.epoch = epoch
                self.train_epoch()
''')


def _lc105(source: str) -> list[str]:
    return [f.message for f in check_source(source, filename="trainer.py", select=["LC105"])]


def test_a_pass_called_under_a_test_wipes_its_tail() -> None:
    found = _lc105(TRAINER)
    assert len(found) == 1 and "`self.optimizer.zero_grad()` wipes its gradients" in found[0], found


def test_without_the_zeroing_before_the_loop_the_tail_is_carried() -> None:
    source = TRAINER.replace("        self.optimizer.zero_grad()\n        for data_iter_step", "        for data_iter_step")
    assert source != TRAINER
    found = _lc105(source)
    assert len(found) == 1 and "carried into the next epoch's first step" in found[0], found
