"""LC303's reading of Accelerate's process count holds only on several processes: a prepared scheduler is
stepped once per process on every optimizer step (so its horizon must be multiplied by
``accelerator.num_processes``), an unprepared one once per call (so it must not be). On one process both
pairings are right. As for LC501 (``tests/test_project_launches.py``), a project whose every documented launch
of the script runs one process keeps it silent; a multi-process launch, or no documented launch, keeps the
finding (an Accelerate script's process count is its launcher's option, not the code's)."""

from __future__ import annotations

from pathlib import Path

from tests.projects import write_project

# LongCat-Image's shape: the prepared scheduler is discarded, the horizon is multiplied by the process count
DISCARDED = """
    import torch
    from accelerate import Accelerator
    from diffusers.optimization import get_scheduler


    def main(args, model, train_dataloader):
        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer, num_warmup_steps=0,
                                     num_training_steps=args.max_train_steps * accelerator.num_processes)
        model, optimizer, _, _ = accelerator.prepare(model, optimizer, train_dataloader, lr_scheduler)
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                accelerator.backward(model(batch))
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
"""

# LTX-Video-Trainer's shape: the scheduler is prepared, the horizon counts one process's optimizer steps
PREPARED = """
    import torch
    from accelerate import Accelerator
    from torch.optim.lr_scheduler import LinearLR


    def train(cfg, model, dataloader):
        accelerator = Accelerator(gradient_accumulation_steps=cfg.gradient_accumulation_steps)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        scheduler = LinearLR(optimizer, start_factor=1.0, end_factor=0.1, total_iters=cfg.steps)
        model, optimizer, scheduler, dataloader = accelerator.prepare(model, optimizer, scheduler, dataloader)
        data_iter = iter(dataloader)
        for step in range(cfg.steps * cfg.gradient_accumulation_steps):
            batch = next(data_iter)
            with accelerator.accumulate(model):
                accelerator.backward(model(batch))
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
"""


def _lc303(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC303", path)
    return [line for line in out.splitlines() if ": LC303" in line]


def test_single_process_launches_keep_both_silent(project: Path, run_cli) -> None:
    write_project(project, {"train.py": DISCARDED, "trainer.py": PREPARED,
                            "README.md": "```\npython train.py --max_train_steps 1000\npython trainer.py\n```\n"})
    assert _lc303(run_cli, "train.py") == [] and _lc303(run_cli, "trainer.py") == []


def test_a_multi_process_launch_reports_both(project: Path, run_cli) -> None:
    write_project(project, {"train.py": DISCARDED, "trainer.py": PREPARED,
                            "train.sh": "accelerate launch --num_processes 8 train.py\n"
                                        "accelerate launch --num_processes 8 trainer.py\n"})
    slow, fast = _lc303(run_cli, "train.py"), _lc303(run_cli, "trainer.py")
    assert len(slow) == 1 and "left out of `accelerator.prepare`" in slow[0] and "P times too slow" in slow[0]
    assert len(fast) == 1 and "handed to `accelerator.prepare`" in fast[0] and "P times too fast" in fast[0]


def test_no_documented_launch_reports_both(project: Path, run_cli) -> None:
    write_project(project, {"train.py": DISCARDED, "trainer.py": PREPARED})
    assert len(_lc303(run_cli, "train.py")) == 1 and len(_lc303(run_cli, "trainer.py")) == 1


# a prepared scheduler stepped once per epoch over a horizon of epochs: Accelerate steps it once per process
EPOCHS = """
    import torch
    from accelerate import Accelerator


    def main(args, model, train_dataloader):
        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
        model, optimizer, train_dataloader, scheduler = accelerator.prepare(model, optimizer, train_dataloader,
                                                                            scheduler)
        for epoch in range(args.epochs):
            for batch in train_dataloader:
                accelerator.backward(model(batch))
                optimizer.step()
                optimizer.zero_grad()
            scheduler.step()
"""


def test_per_epoch_prepared_scheduler_follows_the_launches(project: Path, run_cli) -> None:
    for sub in ("one", "multi", "none"):
        (project / sub).mkdir()
    write_project(project / "one", {"epochs.py": EPOCHS, "README.md": "```\npython epochs.py --epochs 10\n```\n"})
    write_project(project / "multi", {"epochs.py": EPOCHS,
                                      "README.md": "```\naccelerate launch --num_processes 4 epochs.py\n```\n"})
    write_project(project / "none", {"epochs.py": EPOCHS})
    assert _lc303(run_cli, "one/epochs.py") == []
    found = _lc303(run_cli, "multi/epochs.py")
    assert len(found) == 1 and "stepped once per epoch" in found[0] and "P times too fast" in found[0]
    assert len(_lc303(run_cli, "none/epochs.py")) == 1
