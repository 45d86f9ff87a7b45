"""A project whose pins allow only a PyTorch older than 2.4 (mmf: `torch==1.11.0`) gets no warning
from `torch.cuda.amp` and has no `torch.amp.GradScaler` to move to: not LC206, in a training script
or in a module without a training loop, and a changed pin invalidates the cached result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TRAINER = """
    import torch


    def train(model, loader, optimizer):
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
"""

EVALUATION = """
    import torch


    @torch.no_grad()
    def predict(model, batch):
        with torch.cuda.amp.autocast():
            return model(batch).argmax(dim=-1)
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC206", path)
    return [line.split(": ", 1)[1].split()[0] for line in out.splitlines() if ": LC" in line]


@pytest.mark.parametrize(("path", "count"), [("train.py", 2), ("predict.py", 1)])
def test_torch_pinned_below_2_4_has_nothing_deprecated(project: Path, run_cli, path: str, count: int) -> None:
    _write(project, {"train.py": TRAINER, "predict.py": EVALUATION})
    assert _codes(run_cli, path) == ["LC206"] * count  # no pin: today's torch warns
    _write(project, {"requirements.txt": "torch==1.11.0\ntorchvision==0.12.0\n"})
    assert _codes(run_cli, path) == []  # the cached result is not reused: the pin changed
    _write(project, {"requirements.txt": "torch>=1.11.0\n"})
    assert _codes(run_cli, path) == ["LC206"] * count  # a lower bound may install today's torch


def test_a_pin_that_allows_2_4_still_reports(project: Path, run_cli) -> None:
    _write(project, {"train.py": TRAINER, "requirements.txt": "torch<=2.5.1\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]


def test_the_message_says_from_which_torch_it_warns() -> None:
    # Python shows a FutureWarning once per place that calls it, not on every call: the message
    # names the version that warns instead of promising a warning per use
    from loopcheck.engine import check_source

    messages = [f.message for f in check_source(textwrap.dedent(TRAINER), "train.py", select=["LC206"])]
    assert messages == ['`torch.cuda.amp.GradScaler` is deprecated (FutureWarning since torch 2.4): '
                        'use `torch.amp.GradScaler("cuda", ...)`',
                        '`torch.cuda.amp.autocast` is deprecated (FutureWarning since torch 2.4): '
                        'use `torch.amp.autocast("cuda", ...)`']
