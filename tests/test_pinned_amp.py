"""A project whose pins allow only a PyTorch older than 2.4 (mmf: `torch==1.11.0`) gets no warning
from `torch.cuda.amp` and has no `torch.amp.GradScaler` to move to: not LC206, in a training script
or in a module without a training loop, and a changed pin invalidates the cached result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.projects import OLD_AMP_TRAINER

TRAINER = OLD_AMP_TRAINER

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


def test_an_install_command_of_the_readme_pins_torch(project: Path, run_cli) -> None:
    # HyenaDNA documents `conda install pytorch==1.13.0 ...` and has no pin file naming torch
    _write(project, {"train.py": TRAINER, "README.md": "## Install\n```\nconda install pytorch==1.13.0 "
                     "torchvision==0.14.0 pytorch-cuda=11.7 -c pytorch -c nvidia\n```\n"})
    assert _codes(run_cli, "train.py") == []
    _write(project, {"README.md": "pip install torch==1.13.1\nor, for CUDA 12: pip install torch==2.5.1\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]  # the newest documented install warns


def test_a_readme_that_states_a_lower_bound_gives_an_example_only(project: Path, run_cli) -> None:
    # ConvNeXt: "Install Pytorch>=1.8.0 ... For example: pip install torch==1.8.0+cu111 ..."
    _write(project, {"train.py": TRAINER, "INSTALL.md": "Install [Pytorch](https://pytorch.org/)>=1.8.0. For example:\n"
                     "pip install torch==1.8.0+cu111 torchvision==0.9.0+cu111 -f https://download.pytorch.org/whl\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]


def test_the_pin_files_decide_over_the_readme(project: Path, run_cli) -> None:
    _write(project, {"train.py": TRAINER, "requirements.txt": "torch>=2.0\n",
                     "install.sh": "pip install torch==1.9.1+cu111\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]
    _write(project, {"requirements.txt": "numpy\n"})
    assert _codes(run_cli, "train.py") == []
