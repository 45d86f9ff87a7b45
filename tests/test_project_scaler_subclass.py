"""A GradScaler subclass of the project whose own method unscales the optimizer it is handed and
steps it (SAM's ``CustomGradScaler.first_step(optimizer)``: ``self.unscale_(optimizer)``, then
``optimizer.step()``) steps through the scaler it is called on: no step bypasses the scaler (LC203).
A method that steps without unscaling does bypass it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

SCALER = """
    from torch.cuda.amp import GradScaler


    class CustomGradScaler(GradScaler):
        def first_step(self, optimizer, *args, **kwargs):
            if not self._enabled:
                return optimizer.first_step(*args, **kwargs)
            UNSCALE
            return optimizer.step(*args, **kwargs)
"""
TRAIN = """
    import torch

    from custom_grad_scaler import CustomGradScaler


    def train(model, loader, optimizer, criterion):
        scaler = CustomGradScaler()
        for inputs, target in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(inputs), target)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.first_step(optimizer)
            scaler.update()
"""


@pytest.mark.parametrize(("unscale", "found"), [
    ("self.unscale_(optimizer)", 0),
    ("pass", 1),
])
def test_a_scaler_subclass_that_unscales_before_its_step(project: Path, run_cli, unscale: str, found: int) -> None:
    write_project(project, {"custom_grad_scaler.py": SCALER.replace("UNSCALE", unscale), "train.py": TRAIN})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--no-cache", "--select", "LC203", ".")
    assert len([line for line in out.splitlines() if " LC203 " in line]) == found
