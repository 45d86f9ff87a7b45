"""`losses.update(loss, images.size(0))` with an `AverageMeter` of another project module that
keeps what it is handed (`self.val = val; self.sum += val * n`): the meter keeps the loss's graph
across iterations (LC601), as `meter.update_value(k, v)` does; `loss.item()` keeps a number. An EMA
or a scaler of the project is not a meter: its `update` is the training event it names."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

METERS = """
    class AverageMeter:
        def __init__(self):
            self.reset()

        def reset(self):
            self.val = 0
            self.avg = 0
            self.sum = 0
            self.count = 0

        def update(self, val, n=1):
            self.val = val
            self.sum += val * n
            self.count += n
            self.avg = self.sum / self.count


    class ModelEMA:
        def __init__(self, model, decay=0.999):
            self.decay = decay
            self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

        def update(self, model):
            for k, v in model.state_dict().items():
                self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)
"""

TRAIN = """
    import torch
    from utils import AverageMeter, ModelEMA


    def train(model, loader, optimizer, epochs):
        losses = AverageMeter()
        ema = ModelEMA(model)
        for epoch in range(epochs):
            for images, target in loader:
                loss = torch.nn.functional.cross_entropy(model(images), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                ema.update(model)
                losses.update(KEPT, images.size(0))
            print(f"epoch {epoch}: {losses.avg:.4f}")
"""


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    return [line for line in out.splitlines() if ": LC" in line]


def test_a_meter_of_the_project_keeps_the_loss_graph(project: Path, run_cli) -> None:
    _write(project, {"utils.py": METERS, "train.py": TRAIN.replace("KEPT", "loss")})
    found = _codes(run_cli)
    assert len(found) == 1 and found[0].startswith("train.py:16:") and " LC601 " in found[0]
    assert "kept by utils.py:12" in found[0]


@pytest.mark.parametrize("kept", ["loss.item()", "loss.detach()"])
def test_a_meter_handed_a_number_keeps_no_graph(project: Path, run_cli, kept: str) -> None:
    _write(project, {"utils.py": METERS, "train.py": TRAIN.replace("KEPT", kept)})
    assert _codes(run_cli) == []
