"""LC303 on a scheduler built by the entry script and handed to a training function of another
module: the horizon the caller gave its constructor is read against the stepping in the function.
Any caller that passes what cannot be read, or several that disagree, keep it silent."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project.callers import stepped_parameters


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


MAIN = """
    import argparse

    import torch
    from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR

    from engine import train_one_epoch


    def main(args):
        model = torch.nn.Linear(4, 2)
        loader = torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = BUILT
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer, scheduler, epoch)


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=10)
        main(parser.parse_args())
"""

# the function steps the scheduler on every batch
PER_BATCH = """
    def train_one_epoch(model, loader, optimizer, scheduler, epoch):
        model.train()
        for x in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
            scheduler.step()
"""

EPOCHS = "CosineAnnealingLR(optimizer, T_max=args.epochs)"
BATCHES = "OneCycleLR(optimizer, max_lr=0.1, total_steps=args.epochs * len(loader))"


def test_an_epoch_horizon_built_by_the_caller_stepped_per_batch(project: Path, run_cli) -> None:
    _write(project, {"main.py": MAIN.replace("BUILT", EPOCHS), "engine.py": PER_BATCH})
    found = _codes(run_cli, "engine.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("engine.py:8:") and " LC303 " in found[0]
    assert "horizon `args.epochs` counts epochs" in found[0]
    assert "(built at main.py:14 and passed to `train_one_epoch`)" in found[0]


def test_a_batch_horizon_built_by_the_caller_stepped_per_epoch(project: Path, run_cli) -> None:
    engine = """
        def train(model, loader, optimizer, epochs, lr_scheduler=None):
            for epoch in range(epochs):
                for x in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                lr_scheduler.step()
    """
    main = MAIN.replace("from engine import train_one_epoch", "import engine").replace(
        "for epoch in range(args.epochs):\n            train_one_epoch(model, loader, optimizer, scheduler, epoch)",
        "engine.train(model, loader, optimizer, args.epochs, lr_scheduler=scheduler)")
    _write(project, {"main.py": main.replace("BUILT", BATCHES), "engine.py": engine})
    found = _codes(run_cli, "engine.py")
    assert len(found) == 1 and found[0].startswith("engine.py:8:") and " LC303 " in found[0]
    assert "`args.epochs * len(loader)` counts batches" in found[0] and "main.py:14" in found[0]


def test_a_step_under_a_test_for_none_is_read_too(project: Path, run_cli) -> None:
    engine = PER_BATCH.replace("            scheduler.step()", "            if scheduler is not None:\n"
                                                                "                scheduler.step()")
    _write(project, {"main.py": MAIN.replace("BUILT", EPOCHS), "engine.py": engine})
    assert [" LC303 " in f for f in _codes(run_cli, "engine.py")] == [True]


SECOND = """
    import torch
    from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR
    from engine import train_one_epoch

    def finetune(args, model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        sched = BUILT
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer, sched, epoch)
"""


@pytest.mark.parametrize(("built", "files"), [
    (BATCHES, {}),  # a batch horizon stepped per batch
    ("create_scheduler(args, optimizer)", {}),  # a factory of a library: not read
    ("CosineAnnealingLR(optimizer, T_max=args.t_max)", {}),  # a horizon whose unit the name does not say
    # the name is bound twice: the scheduler passed is the warmup wrapper
    (f"{EPOCHS}\n        scheduler = GradualWarmupScheduler(optimizer, 1, 5, after_scheduler=scheduler)", {}),
    # two callers disagree: one counts batches
    (EPOCHS, {"finetune.py": SECOND.replace("BUILT", BATCHES)}),
    # another caller passes a scheduler it was given
    (EPOCHS, {"tools/sweep.py": "from engine import train_one_epoch\n\n\ndef run(m, dl, opt, sched):\n"
                                "    train_one_epoch(m, dl, opt, sched, 0)\n"}),
    # a star import hides which calls run this function
    (EPOCHS, {"other.py": "from engine import *\n\ntrain_one_epoch(m, dl, opt, s, 0)\n"}),
])
def test_callers_in_the_same_unit_or_unknown_or_disagreeing(project: Path, run_cli, built: str,
                                                            files: dict[str, str]) -> None:
    _write(project, {"main.py": MAIN.replace("BUILT", built), "engine.py": PER_BATCH, **files})
    assert _codes(run_cli, "engine.py") == []


def test_callers_that_agree_are_both_named(project: Path, run_cli) -> None:
    _write(project, {"main.py": MAIN.replace("BUILT", EPOCHS), "engine.py": PER_BATCH,
                     "finetune.py": SECOND.replace("BUILT", EPOCHS)})
    found = _codes(run_cli, "engine.py")
    assert len(found) == 1 and "(built at finetune.py:8, main.py:14 and passed to `train_one_epoch`)" in found[0]


def test_no_caller_no_finding(project: Path, run_cli) -> None:
    _write(project, {"engine.py": PER_BATCH})
    assert _codes(run_cli, "engine.py") == []


def test_a_caller_that_changes_its_horizon_invalidates_the_cached_result(project: Path, run_cli) -> None:
    _write(project, {"main.py": MAIN.replace("BUILT", EPOCHS), "engine.py": PER_BATCH})
    assert len(_codes(run_cli, "engine.py")) == 1
    _write(project, {"main.py": MAIN.replace("BUILT", BATCHES)})
    assert _codes(run_cli, "engine.py") == []
    _write(project, {"main.py": MAIN.replace("BUILT", EPOCHS)})
    assert len(_codes(run_cli, "engine.py")) == 1
    _write(project, {"finetune.py": SECOND.replace("BUILT", "create_scheduler(args, optimizer)")})  # a new caller
    assert _codes(run_cli, "engine.py") == []


@pytest.mark.parametrize(("text", "expected"), [
    ("def train(model, loader, optimizer, lr_scheduler):\n    lr_scheduler.step()\n",
     (("train", "lr_scheduler", "lr_scheduler", 3),)),
    ("def train(model,  # the model\n          opt: Optimizer = make(1, 2), *, sched=None):\n    sched.step()\n",
     (("train", "sched", "sched", None),)),
    ("def train(model, *args, scheduler=None):\n    scheduler.step()\n", ()),  # positions after *args unknown
    ("def train(model, scheduler):\n    scheduler.step(loss)\n", ()),  # not `.step()`
    ("class T:\n    def train(self, scheduler):\n        scheduler.step()\n", ()),  # a method's parameter
    # a class that keeps the scheduler its `__init__` is given, and steps it
    ("class T:\n    def __init__(self, model, lr_scheduler=None):\n        self.sched = lr_scheduler\n\n"
     "    def fit(self):\n        self.sched.step()\n", (("T", "self.sched", "lr_scheduler", 1),)),
    # ... assigned again elsewhere: not only what the caller passed
    ("class T:\n    def __init__(self, model, scheduler):\n        self.scheduler = scheduler\n\n"
     "    def fit(self):\n        self.scheduler = make()\n        self.scheduler.step()\n", ()),
    # ... assigned outside `__init__`
    ("class T:\n    def setup(self, scheduler):\n        self.scheduler = scheduler\n\n"
     "    def fit(self):\n        self.scheduler.step()\n", ()),
])
def test_stepped_parameters_are_read_from_the_text(text: str, expected: tuple[object, ...]) -> None:
    assert stepped_parameters(text.encode()) == expected


TRAINER = """
    import torch


    class Trainer:
        def __init__(self, model, optimizer, scheduler, args):
            self.model = model
            self.optimizer = optimizer
            self.scheduler = scheduler
            self.args = args

        def train(self, loader):
            for epoch in range(self.args.epochs):
                for x in loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
                if epoch >= 10:
                    self.scheduler.step()
"""

RUN = """
    import torch

    from trainer import Trainer


    def main(args, model, loader):
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=HORIZON, eta_min=0)
        trainer = Trainer(model=model, optimizer=optimizer, scheduler=scheduler, args=args)
        trainer.train(loader)
"""


def test_a_batch_horizon_kept_by_a_trainer_and_stepped_per_epoch(project: Path, run_cli) -> None:
    _write(project, {"run.py": RUN.replace("HORIZON", "len(loader)"), "trainer.py": TRAINER})
    found = _codes(run_cli, "trainer.py")
    assert len(found) == 1 and found[0].startswith("trainer.py:19:") and " LC303 " in found[0]
    assert "`len(loader)` counts batches (built at run.py:9 and passed to `Trainer`)" in found[0]


@pytest.mark.parametrize("files", [
    {"run.py": RUN.replace("HORIZON", "args.epochs - 10")},  # epochs, stepped per epoch
    # a subclass of another file builds trainers too: what it passes is not read
    {"run.py": RUN.replace("HORIZON", "len(loader)"),
     "sub.py": "from trainer import Trainer\n\n\nclass Sub(Trainer):\n    pass\n"},
    # the trainer is handed on: calls under another name
    {"run.py": RUN.replace("HORIZON", "len(loader)") + "\n\nFACTORIES = {'default': Trainer}\n"},
])
def test_trainer_callers_in_the_same_unit_or_unknown(project: Path, run_cli, files: dict[str, str]) -> None:
    _write(project, {"trainer.py": TRAINER, **files})
    assert _codes(run_cli, "trainer.py") == []


def test_a_scheduler_kept_from_keyword_arguments(project: Path, run_cli) -> None:
    """The trainer takes `**kwargs` and keeps `kwargs["scheduler"]`: the callers' keyword is read."""
    trainer = TRAINER.replace("def __init__(self, model, optimizer, scheduler, args):",
                              "def __init__(self, *args, **kwargs):")
    for name in ("model", "optimizer", "scheduler", "args"):
        trainer = trainer.replace(f"self.{name} = {name}\n", f"self.{name} = kwargs['{name}']\n")
    assert "kwargs['scheduler']" in trainer
    _write(project, {"run.py": RUN.replace("HORIZON", "len(loader)"), "trainer.py": trainer})
    found = _codes(run_cli, "trainer.py")
    assert len(found) == 1 and " LC303 " in found[0] and "(built at run.py:9 and passed to `Trainer`)" in found[0]
    # a caller that passes it by position cannot reach `**kwargs`: nothing read
    _write(project, {"run.py": RUN.replace("HORIZON", "len(loader)").replace(
        "Trainer(model=model, optimizer=optimizer, scheduler=scheduler, args=args)",
        "Trainer(model, optimizer, scheduler, args)")})
    assert _codes(run_cli, "trainer.py") == []


FACTORY = """
    from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR


    def build_scheduler(optimizer, args, steps_per_epoch):
        if args.sched == "onecycle":
            return OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=steps_per_epoch)
        return CosineAnnealingLR(optimizer, T_max=args.epochs)
"""


@pytest.mark.parametrize(("factory", "found"), [
    (FACTORY, False),  # one branch counts batches, stepped per batch: not every schedule mismatches
    # both count epochs
    (FACTORY.replace("OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=steps_per_epoch)",
                     "StepLR(optimizer, step_size=args.lr_decay_epochs)").replace("OneCycleLR", "StepLR"), True),
])
def test_a_scheduler_built_by_a_project_factory_in_the_entry_script(project: Path, run_cli, factory: str,
                                                                     found: bool) -> None:
    main = MAIN.replace("from engine import train_one_epoch", "from engine import train_one_epoch\n"
                        "    from utils import build_scheduler")
    _write(project, {"main.py": main.replace("BUILT", "build_scheduler(optimizer, args, len(loader))"),
                     "engine.py": PER_BATCH, "utils.py": factory})
    codes = _codes(run_cli, "engine.py")
    assert [" LC303 " in c and "main.py:15" in c for c in codes] == ([True] if found else [])


def test_a_factory_of_the_entry_script_itself(project: Path, run_cli) -> None:
    main = MAIN.replace("def main(args):", "def make_schedule(optimizer, epochs):\n"
                        "        return CosineAnnealingLR(optimizer, T_max=epochs)\n\n\n    def main(args):")
    _write(project, {"main.py": main.replace("BUILT", "make_schedule(optimizer, args.epochs)"),
                     "engine.py": PER_BATCH})
    codes = _codes(run_cli, "engine.py")
    assert len(codes) == 1 and "horizon `args.epochs` counts epochs" in codes[0]


# FiD's shape: `train(...)` in one module steps the scheduler per optimizer step while its budget
# `opt.total_steps` counts micro-batches; the entry script binds the scheduler in a fresh-run branch
# (`src.util.set_optim`, a tuple factory of a module imported whole) and in resume branches (`load`).
# `set_optim` builds a fixed schedule (no horizon) or a linear one over `scheduler_steps`, which is
# `opt.total_steps` unless the user gives `--scheduler_steps`.
SET_OPTIM = """
    import torch


    class FixedScheduler(torch.optim.lr_scheduler.LambdaLR):
        def __init__(self, optimizer, last_epoch=-1):
            super().__init__(optimizer, lambda step: 1.0, last_epoch=last_epoch)


    def set_optim(opt, model):
        optimizer = torch.optim.AdamW(model.parameters(), lr=opt.lr)
        if opt.scheduler == "fixed":
            scheduler = FixedScheduler(optimizer)
        elif opt.scheduler == "linear":
            if opt.scheduler_steps is None:
                scheduler_steps = opt.total_steps
            else:
                scheduler_steps = opt.scheduler_steps
            scheduler = WarmupLinearScheduler(optimizer, warmup_steps=opt.warmup_steps, scheduler_steps=scheduler_steps)
        return optimizer, scheduler


    def load(path, opt):
        checkpoint = torch.load(path)
        optimizer, scheduler = set_optim(checkpoint["opt"], checkpoint["model"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        return checkpoint["model"], optimizer, scheduler, checkpoint["step"]
"""

FID_ENGINE = """
    def train(model, optimizer, scheduler, step, loader, opt):
        while step < opt.total_steps:
            for x in loader:
                step += 1
                (model(x).sum() / opt.accumulation_steps).backward()
                if step % opt.accumulation_steps == 0:
                    optimizer.step()
                    scheduler.step()
                    model.zero_grad()
"""

FID_MAIN = """
    import torch

    import src.util
    from engine import train


    def main(opt, loader):
        if opt.resume is None:
            model = torch.nn.Linear(4, 2)
            optimizer, scheduler = src.util.set_optim(opt, model)
            step = 0
        elif opt.model_path is None:
            model, optimizer, scheduler, step = src.util.load(opt.resume, opt)
        else:
            model, optimizer, scheduler, step = src.util.load(opt.model_path, opt)
        opt.train_batch_size = opt.per_gpu_batch_size * 2
        train(model, optimizer, scheduler, step, loader, opt)
"""


def test_a_scheduler_bound_in_several_branches_is_read_per_configuration(project: Path, run_cli) -> None:
    _write(project, {"src/__init__.py": "", "src/util.py": SET_OPTIM, "engine.py": FID_ENGINE, "main.py": FID_MAIN})
    found = _codes(run_cli, "engine.py")
    assert len(found) == 1 and found[0].startswith("engine.py:9:") and " LC303 " in found[0], found
    assert "horizon `opt.total_steps` counts batches in the configuration that builds `WarmupLinearScheduler`" \
        in found[0]
    assert "(built at main.py:11 and passed to `train`)" in found[0]


@pytest.mark.parametrize(("module", "main"), [
    # the default horizon counted in optimizer steps: no configuration mismatches
    (SET_OPTIM.replace("scheduler_steps = opt.total_steps\n", "scheduler_steps = opt.total_steps // opt.accumulation_steps\n"),
     FID_MAIN),
    # another schedule with a horizon of its own (a unit the code does not say) beside the mismatched one
    (SET_OPTIM.replace("FixedScheduler(optimizer)", "torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=opt.t_max)"),
     FID_MAIN),
    # two bindings that may both run: the later one wraps or replaces the first
    (SET_OPTIM, FID_MAIN.replace("        opt.train_batch_size", "        if opt.fixed:\n"
                                 "            optimizer, scheduler = src.util.set_optim(opt, model)\n"
                                 "        opt.train_batch_size")),
    # the caller changes the budget the horizon names: not read
    (SET_OPTIM, FID_MAIN.replace("opt.train_batch_size = ", "opt.total_steps = ")),
])
def test_configurations_that_keep_it_silent(project: Path, run_cli, module: str, main: str) -> None:
    _write(project, {"src/__init__.py": "", "src/util.py": module, "engine.py": FID_ENGINE, "main.py": main})
    assert _codes(run_cli, "engine.py") == []
