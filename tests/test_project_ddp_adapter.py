"""LC501 where the trainer wraps its model through a module the entry script hands it: the helper
(``train/trainer_adapter.py``'s ``model_to_ddp``) builds and returns the DDP wrapper, the entry script
passes the module itself (``Trainer(adapter=trainer_adapter)``), and the trainer rebinds its model to
``self.adapter.model_to_ddp(self.model)``, then accumulates without ``no_sync()``. No import of the
trainer resolves the call; the helper's name and the rebinding say it is the wrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project


def _codes(run_cli, *paths: str, cache: bool = False) -> list[str]:
    flags = [] if cache else ["--no-cache"]
    _, out, _ = run_cli("check", "-q", "--no-show-source", *flags, "--select", "LC501", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


ADAPTER = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    def model_to_ddp(model, local_rank):
        if torch.distributed.is_initialized():
            model = DDP(model, device_ids=[local_rank])
        return model
"""

ENTRY = """
    from train import trainer_adapter
    from train.trainer import Trainer


    def main(cfg, loader):
        trainer = Trainer(adapter=trainer_adapter, cfg=cfg)
        trainer.train_one_epoch(loader)
"""

TRAINER = """
    import torch


    class Trainer:
        def __init__(self, adapter, cfg):
            self.adapter = adapter
            self.cfg = cfg
            self.model = torch.nn.Linear(8, 2)
            self.model = self.adapter.model_to_ddp(self.model, cfg.local_rank)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def train_one_epoch(self, loader):
            step = 0
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.cfg.accum
                loss.backward()
                step += 1
                if step % self.cfg.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""

FILES = {"train/__init__.py": "", "train/trainer_adapter.py": ADAPTER, "run_pretraining.py": ENTRY,
         "train/trainer.py": TRAINER}


def test_a_trainer_that_rewraps_its_model_through_a_handed_module(project: Path, run_cli) -> None:
    write_project(project, FILES)
    found = _codes(run_cli, "train/trainer.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("train/trainer.py:17:"), found
    assert "(by train/trainer_adapter.py:8)" in found[0]


@pytest.mark.parametrize("files", [
    # the helper wraps in DataParallel: nothing all-reduces
    {"train/trainer_adapter.py": ADAPTER.replace("DDP(model, device_ids=[local_rank])", "torch.nn.DataParallel(model)")},
    # the helper wraps but hands back the plain module
    {"train/trainer_adapter.py": ADAPTER.replace("return model", "return model.module")},
    # the trainer wraps another module (a teacher) and trains its own plain model
    {"train/trainer.py": TRAINER.replace("self.model = self.adapter.model_to_ddp(self.model, cfg.local_rank)",
                                         "self.teacher = self.adapter.model_to_ddp(torch.nn.Linear(8, 2), 0)")},
    # the trainer skips the sync on the micro-batches before the last
    {"train/trainer.py": TRAINER.replace(
        "                loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.cfg.accum\n"
        "                loss.backward()\n"
        "                step += 1\n",
        "                step += 1\n"
        "                with self.model.no_sync() if step % self.cfg.accum else contextlib.nullcontext():\n"
        "                    loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.cfg.accum\n"
        "                    loss.backward()\n").replace("import torch\n", "import contextlib\n\n    import torch\n", 1)},
    # `self.adapter` is built from an imported module whose `model_to_ddp` of that name wraps nothing
    {"train/trainer.py": TRAINER.replace("import torch\n", "import torch\n\n    import plain_adapter\n", 1)
     .replace("self.adapter.model_to_ddp(self.model, cfg.local_rank)",
              "plain_adapter.model_to_ddp(self.model, cfg.local_rank)"),
     "train/plain_adapter.py": "def model_to_ddp(model, local_rank):\n    return model\n"},
])
def test_no_ddp_module_reaches_the_trainer_or_it_controls_the_sync(project: Path, run_cli,
                                                                   files: dict[str, str]) -> None:
    write_project(project, {**FILES, **files})
    assert _codes(run_cli, "train/trainer.py") == []


def test_a_helper_that_stops_wrapping_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, FILES)
    assert len(_codes(run_cli, "train/trainer.py", cache=True)) == 1
    write_project(project, {"train/trainer_adapter.py": ADAPTER.replace("DDP(model, device_ids=[local_rank])",
                                                                        "torch.nn.DataParallel(model)")})
    assert _codes(run_cli, "train/trainer.py", cache=True) == []
