"""What the stepped object is decides two findings: a schedule class of the project that derives
from nothing is not torch's scheduler (LC302 reads torch's order), and a loop whose losses come from
``ddp.module`` never runs the DDP wrapper's forward, so nothing all-reduces per micro-batch (LC501).
Each quiet shape has a twin that is still flagged."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_SCHEDULE = """
class WarmupSchedule(BASES):
    def __init__(self, optimizer, peak_lr, warmup_epochs):
        self.optimizer = optimizer
        self.peak_lr = peak_lr
        self.warmup_epochs = warmup_epochs
        self.epoch = 0

    def step(self):
        lr = self.peak_lr * min(1.0, (self.epoch + 1) / self.warmup_epochs)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.epoch += 1
"""

_TRAIN = """
import torch
IMPORT

def train(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = WarmupSchedule(optimizer, 0.1, 5)
    for epoch in range(epochs):
        schedule.step()
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
"""


def _codes(source: str, code: str) -> list[tuple[int, str]]:
    found = check_text(textwrap.dedent(source), "train.py", resolve(select=[code]))
    return sorted((f.line, f.code) for f in found)


@pytest.mark.parametrize(("bases", "flagged"), [
    ("", []),  # its own step(): it sets the epoch's value, its constructor sets none
    ("object", []),
    ("torch.optim.lr_scheduler._LRScheduler", [(9, "LC302")]),  # torch's order
    ("LRScheduler", [(9, "LC302")]),
])
def test_plain_schedule_class_of_the_file(bases: str, flagged: list[tuple[int, str]]) -> None:
    schedule = _SCHEDULE.replace("(BASES)", f"({bases})" if bases else "")
    source = _TRAIN.replace("IMPORT", "from torch.optim.lr_scheduler import LRScheduler") + schedule
    assert _codes(source, "LC302") == flagged


@pytest.mark.parametrize(("bases", "flagged"), [("", False), ("_LRScheduler", True)])
def test_plain_schedule_class_of_another_module(project: Path, run_cli, bases: str, flagged: bool) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    imports = "from torch.optim.lr_scheduler import _LRScheduler\n" if bases else ""
    (project / "lr_schedule.py").write_text(imports + textwrap.dedent(_SCHEDULE).replace(
        "(BASES)", f"({bases})" if bases else ""))
    (project / "train.py").write_text(textwrap.dedent(_TRAIN).replace("IMPORT", "from lr_schedule import WarmupSchedule"))
    _, out, _ = run_cli("check", "-q", "--no-cache", "--no-show-source", "--select", "LC302", "train.py")
    assert ("LC302" in out) is flagged, out


_VLT5 = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, args):
        self.args = args
        self.model = DDP(model, device_ids=[args.gpu], find_unused_parameters=True)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

    def train(self):
        for step_i, batch in enumerate(self.train_loader):
            if self.args.distributed:
                results = FORWARD
            else:
                results = self.model.train_step(batch)
            loss = results["loss"] / self.args.gradient_accumulation_steps
            loss.backward()
            if (step_i + 1) % self.args.gradient_accumulation_steps == 0 or step_i == len(self.train_loader) - 1:
                self.optim.step()
                for param in self.model.parameters():
                    param.grad = None
"""


@pytest.mark.parametrize(("forward", "flagged"), [
    # DDP's reducer acts only on a backward its own forward prepared: no micro-batch all-reduces
    ("self.model.module.train_step(batch)", []),
    ("{'loss': self.model(batch)}", [(19, "LC501")]),  # the wrapper's forward: every backward all-reduces
    ("{'loss': compute_loss(self.model, batch)}", [(19, "LC501")]),  # a helper handed the wrapper
    # a builtin that only looks at the wrapper runs no forward (PointNeXt's classification loop)
    ("{'loss': self.model.loss(batch) if not hasattr(self.model, 'module') else self.model.module.loss(batch)}", []),
    ("{'loss': compute_loss(self.model, batch) if isinstance(self.model, DDP) else self.model.loss(batch)}",
     [(19, "LC501")]),  # the helper is handed the wrapper: its forward may run there
])
def test_forward_through_the_wrapped_module(forward: str, flagged: list[tuple[int, str]]) -> None:
    assert _codes(_VLT5.replace("FORWARD", forward), "LC501") == flagged
