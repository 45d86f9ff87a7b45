"""LC103 beside a method of the object holding the stepped optimizer, defined in another module."""
from __future__ import annotations

from loopcheck.engine import check_source

SCRIPT = '''
import torch
from training.pretrain_trainer import PreTrainer


def main(args):
    trainer = PreTrainer(args)
    scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
    while trainer.global_step < args.total_steps:
        batch = make_batch(args)
        if scaler is not None:
            with torch.amp.autocast("cuda"):
                loss = trainer.train_step(batch)
            scaler.scale(loss).backward()
            scaler.step(trainer.optimizer)
            scaler.update()
        else:
            loss = trainer.train_step(batch)
'''


def _lc103(source: str) -> int:
    return sum(f.code == "LC103" for f in check_source(source, filename="scripts/pretrain.py", select=["LC103"]))


def test_a_method_of_the_holder_out_of_sight_may_clear_its_optimizer():
    assert _lc103(SCRIPT) == 0


def test_module_methods_of_the_holder_clear_nothing():
    only_modes = SCRIPT.replace("loss = trainer.train_step(batch)", "loss = trainer(batch)").replace(
        "scaler.update()", "scaler.update()\n            trainer.train()")
    assert _lc103(only_modes) == 1


def test_a_method_this_file_defines_is_read_not_assumed():
    defined = SCRIPT + '''

class Holder:
    def train_step(self, batch):
        return self.model(batch).sum()
'''
    assert _lc103(defined) == 1
