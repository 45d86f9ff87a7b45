"""LC501 where the DDP wrap is two modules away: a project helper builds and returns the DDP modules
(``models/model.py``), an entry file calls it and hands what it got to the loop file's class
(``loader.py``: ``WORKER(Gen=Gen, Dis=Dis)``), and the loop file (``worker.py``) accumulates without
``no_sync()``. Neither the entry file nor the loop file calls ``DDP(...)``. The finding works on the
changed file alone (pre-commit) and with the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.project.facts import ModuleReader
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


# One hop further: a project function returns what the DDP-returning helper of another module returned
# (llm-random's `get_model()` in lizrd/train/train_utils.py around `wrap_in_ddp()` of lizrd/core/distributed.py),
# and the entry script hands that function's result to the loop file's class.
WRAP_IN_DDP = """
    from torch.nn.parallel import DistributedDataParallel as DDP


    def wrap_in_ddp(module, local_rank):
        return DDP(module=module.to(f"cuda:{local_rank}"), device_ids=[local_rank])
"""

GET_MODEL = """
    import torch

    from lizrd.core.distributed import wrap_in_ddp


    def get_model(dm, ddp_enabled, local_rank=None):
        model = torch.nn.Linear(dm, dm)
        if ddp_enabled:
            model = wrap_in_ddp(module=model, local_rank=local_rank)
        return model
"""

RUN = """
    import torch

    from lizrd.train.train_utils import get_model
    from trainer import Trainer


    def main(rank, args):
        model = get_model(args.dm, ddp_enabled=rank is not None, local_rank=rank)
        trainer = Trainer(model=model, gradient_accumulation_steps=args.acc)
        trainer.train(args.n_steps)
"""

TRAINER = """
    import torch


    class Trainer:
        def __init__(self, model, gradient_accumulation_steps):
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters())
            self.gradient_accumulation_steps = gradient_accumulation_steps

        def train(self, n_steps):
            for step in range(n_steps):
                batch = torch.randn(8, 4)
                for i in range(self.gradient_accumulation_steps):
                    chunk = batch.chunk(self.gradient_accumulation_steps)[i]
                    loss = self.model(chunk).pow(2).mean() / self.gradient_accumulation_steps
                    loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
"""

OWN_MODEL = GET_MODEL.replace("        return model\n", "        return torch.nn.Linear(dm, dm)\n")
RELAYED = {"lizrd/__init__.py": "", "lizrd/core/__init__.py": "", "lizrd/train/__init__.py": "",
           "lizrd/core/distributed.py": WRAP_IN_DDP, "lizrd/train/train_utils.py": GET_MODEL, "run.py": RUN,
           "trainer.py": TRAINER}


def test_a_function_returning_a_helpers_ddp_module_hands_it_on(project: Path, run_cli) -> None:
    write_project(project, RELAYED)
    found = _codes(run_cli, "trainer.py")
    assert len(found) == 1 and found[0].startswith("trainer.py:17:") and "(by run.py:9)" in found[0], found


@pytest.mark.parametrize("change", [
    # the function returns a module of its own, not the helper's
    {"lizrd/train/train_utils.py": OWN_MODEL},
    # a relay of the relay: one hop only
    {"lizrd/train/build.py": "from lizrd.train.train_utils import get_model\n\n\ndef build(dm, rank):\n"
                             "    model = get_model(dm, True, rank)\n    return model\n",
     "run.py": RUN.replace("from lizrd.train.train_utils import get_model", "from lizrd.train.build import build")
     .replace("get_model(args.dm, ddp_enabled=rank is not None, local_rank=rank)", "build(args.dm, rank)")},
])
def test_no_relayed_ddp_module_reaches_the_trainer(project: Path, run_cli, change: dict[str, str]) -> None:
    write_project(project, {**RELAYED, **change})
    assert _codes(run_cli, "trainer.py") == []


@pytest.mark.parametrize("change", [
    {"lizrd/train/train_utils.py": OWN_MODEL},
    {"run.py": RUN.replace("Trainer(model=model,", "Trainer(model=torch.nn.Linear(4, 4),")},
])
def test_a_changed_relay_or_entry_invalidates_the_cached_result(project: Path, run_cli,
                                                                 change: dict[str, str]) -> None:
    write_project(project, RELAYED)
    assert len(_codes(run_cli, "trainer.py", cache=True)) == 1
    write_project(project, change)
    assert _codes(run_cli, "trainer.py", cache=True) == []


def test_a_function_that_starts_relaying_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {**RELAYED, "lizrd/train/train_utils.py": OWN_MODEL})
    assert _codes(run_cli, "trainer.py", cache=True) == []
    write_project(project, {"lizrd/train/train_utils.py": GET_MODEL})
    assert len(_codes(run_cli, "trainer.py", cache=True)) == 1


def test_a_warm_run_does_not_parse_the_helpers_callers_again(project: Path, run_cli,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every checked file's cache key asks which functions relay a helper's result: what the callers'
    functions return is kept with their facts, so a run whose results are all cached parses none."""
    write_project(project, RELAYED)
    assert len(_codes(run_cli, "trainer.py", "run.py", cache=True)) == 1
    read = []
    real = ModuleReader.returned_calls
    monkeypatch.setattr(ModuleReader, "returned_calls", lambda self: read.append(self.path) or real(self))
    assert len(_codes(run_cli, "trainer.py", "run.py", cache=True)) == 1
    assert read == []
    write_project(project, {"lizrd/train/train_utils.py": OWN_MODEL})  # a new version is read again
    assert _codes(run_cli, "trainer.py", "run.py", cache=True) == []
    assert read == ["lizrd/train/train_utils.py"]


def test_files_that_start_with_a_byte_order_mark(project: Path, run_cli) -> None:
    # editors on Windows save UTF-8 with a BOM (StyleGAN2-ADA's training loop has one): the facts of
    # such a file are read as those of any other
    write_project(project, {"models/__init__.py": "", "models/model.py": HELPER, "loader.py": ENTRY,
                            "worker.py": WORKER})
    for name in ("models/model.py", "loader.py", "worker.py"):
        path = project / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    found = _codes(run_cli, "worker.py")
    assert len(found) == 1 and found[0].startswith("worker.py:18:") and "(by loader.py:12)" in found[0], found
