"""LC501 where the DDP wrap is two modules away: a project helper builds and returns the DDP modules
(``models/model.py``), an entry file calls it and hands what it got to the loop file's class
(``loader.py``: ``WORKER(Gen=Gen, Dis=Dis)``), and the loop file (``worker.py``) accumulates without
``no_sync()``. Neither the entry file nor the loop file calls ``DDP(...)``. The finding works on the
changed file alone (pre-commit) and with the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project


def _codes(run_cli, *paths: str, cache: bool = False) -> list[str]:
    flags = [] if cache else ["--no-cache"]
    _, out, _ = run_cli("check", "-q", "--no-show-source", *flags, "--select", "LC501", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


HELPER = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    def prepare_parallel_training(Gen, Dis, world_size, device):
        if world_size > 1:
            Gen = DDP(Gen, device_ids=[device])
            Dis = DDP(Dis, device_ids=[device])
        return Gen, Dis
"""

ENTRY = """
    import torch

    import models.model as model
    from worker import WORKER


    def load_worker(cfg, device):
        Gen = torch.nn.Linear(8, 8).to(device)
        Dis = torch.nn.Linear(8, 1).to(device)
        if cfg.world_size > 1:
            Gen, Dis = model.prepare_parallel_training(Gen, Dis, cfg.world_size, device)
        worker = WORKER(cfg=cfg, Gen=Gen, Dis=Dis)
        worker.train_discriminator(cfg.loader)
"""

WORKER = """
    import torch


    class WORKER:
        def __init__(self, cfg, Gen, Dis):
            self.cfg = cfg
            self.Gen, self.Dis = Gen, Dis
            self.OPT = torch.optim.Adam(self.Dis.parameters(), lr=2e-4)

        def train_discriminator(self, loader):
            batches = iter(loader)
            self.OPT.zero_grad()
            for acml_index in range(self.cfg.acml_steps):
                real = next(batches)
                fake = self.Gen(torch.randn_like(real)).detach()
                loss = (self.Dis(fake) - self.Dis(real)).mean() / self.cfg.acml_steps
                loss.backward()
            self.OPT.step()
"""


def test_the_loop_file_of_a_class_handed_a_helpers_ddp_modules(project: Path, run_cli) -> None:
    write_project(project, {"models/__init__.py": "", "models/model.py": HELPER, "loader.py": ENTRY,
                            "worker.py": WORKER})
    found = _codes(run_cli, "worker.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("worker.py:18:"), found
    assert "(by loader.py:12)" in found[0]


@pytest.mark.parametrize("files", [
    # the loop file skips the sync on the micro-batches before the last
    {"worker.py": WORKER.replace(
        "                loss = (self.Dis(fake) - self.Dis(real)).mean() / self.cfg.acml_steps\n"
        "                loss.backward()\n",
        "                if acml_index < self.cfg.acml_steps - 1:\n"
        "                    with self.Dis.no_sync():\n"
        "                        loss = (self.Dis(fake) - self.Dis(real)).mean() / self.cfg.acml_steps\n"
        "                        loss.backward()\n"
        "                else:\n"
        "                    loss = (self.Dis(fake) - self.Dis(real)).mean() / self.cfg.acml_steps\n"
        "                    loss.backward()\n")},
    # the helper wraps in DataParallel: nothing all-reduces
    {"models/model.py": HELPER.replace("DDP(Gen, device_ids=[device])", "torch.nn.DataParallel(Gen)")
     .replace("DDP(Dis, device_ids=[device])", "torch.nn.DataParallel(Dis)")},
    # the helper wraps but returns the plain modules
    {"models/model.py": HELPER.replace("return Gen, Dis", "return Gen.module, Dis.module")},
    # the entry file hands the worker modules of its own, not the helper's
    {"loader.py": ENTRY.replace("WORKER(cfg=cfg, Gen=Gen, Dis=Dis)",
                                "WORKER(cfg=cfg, Gen=torch.nn.Linear(8, 8), Dis=torch.nn.Linear(8, 1))")},
    # the entry file calls the helper without keeping what it returns
    {"loader.py": ENTRY.replace("Gen, Dis = model.prepare_parallel_training", "model.prepare_parallel_training")},
])
def test_no_ddp_module_reaches_the_loop_or_it_controls_the_sync(project: Path, run_cli, files: dict[str, str]) -> None:
    write_project(project, {"models/__init__.py": "", "models/model.py": HELPER, "loader.py": ENTRY,
                            "worker.py": WORKER, **files})
    assert _codes(run_cli, "worker.py") == []


def test_a_helper_imported_by_name_and_a_loop_function(project: Path, run_cli) -> None:
    entry = """
        from models.model import prepare_parallel_training
        from engine import train_discriminator


        def main(cfg, Gen, Dis, device):
            Gen, Dis = prepare_parallel_training(Gen, Dis, cfg.world_size, device)
            train_discriminator(Dis, cfg.loader, cfg.acml_steps)
    """
    engine = """
        import torch


        def train_discriminator(Dis, loader, acml_steps):
            opt = torch.optim.Adam(Dis.parameters(), lr=2e-4)
            for i, real in enumerate(loader):
                loss = Dis(real).mean() / acml_steps
                loss.backward()
                if (i + 1) % acml_steps == 0:
                    opt.step()
                    opt.zero_grad()
    """
    write_project(project, {"models/__init__.py": "", "models/model.py": HELPER, "main.py": entry,
                            "engine.py": engine})
    found = _codes(run_cli, "engine.py")
    assert len(found) == 1 and "(by main.py:7)" in found[0], found


@pytest.mark.parametrize("change", [
    {"loader.py": ENTRY.replace("Gen, Dis = model.prepare_parallel_training", "model.prepare_parallel_training")},
    {"models/model.py": HELPER.replace("return Gen, Dis", "return Gen.module, Dis.module")},
])
def test_a_changed_entry_or_helper_invalidates_the_cached_result(project: Path, run_cli, change: dict[str, str]) -> None:
    write_project(project, {"models/__init__.py": "", "models/model.py": HELPER, "loader.py": ENTRY,
                            "worker.py": WORKER})
    assert len(_codes(run_cli, "worker.py", cache=True)) == 1
    write_project(project, change)
    assert _codes(run_cli, "worker.py", cache=True) == []
