"""Dependency pins as a project fact: a project that pins an older library gets that library's
behaviour (Accelerate < 0.16 steps a prepared scheduler on every call; torch < 1.1 wanted the
scheduler stepped before the optimizer), read from the project root, and a changed pin file
invalidates the cached result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project.pins import forget, pins_of

# StableTuner's loop in small: a prepared scheduler stepped inside accumulate(), its horizon
# multiplied by the accumulation count (right for accelerate 0.15, a quarter of the run for >= 0.16)
ACCELERATE_LOOP = """
    import torch
    from accelerate import Accelerator
    from transformers import get_scheduler


    def main(model, loader, max_train_steps=500, gradient_accumulation_steps=4):
        accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
        optimizer = torch.optim.AdamW(model.parameters())
        lr_scheduler = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=0,
                                     num_training_steps=max_train_steps * gradient_accumulation_steps)
        model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
        for epoch in range(10):
            for x, y in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
"""

# pytorch-semseg's order: the scheduler first, as torch 0.4 documented it
SCHEDULER_FIRST = """
    import torch


    def train(model, loader, optimizer, scheduler):
        for epoch in range(10):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line.split(" ")[1] for line in out.splitlines() if ": LC" in line]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    forget()


@pytest.mark.parametrize(("name", "text", "package", "version", "expected"), [
    ("requirements.txt", "accelerate==0.15.0\ntransformers>=4.25.1\n", "accelerate", "0.16", True),
    ("requirements.txt", "accelerate==0.16.0\n", "accelerate", "0.16", False),
    ("requirements.txt", "accelerate>=0.12\n", "accelerate", "0.16", False),  # may install today's
    ("requirements.txt", "accelerate\n", "accelerate", "0.16", False),
    ("requirements.txt", "accelerate>=0.12,<0.16\n", "accelerate", "0.16", True),
    ("requirements.txt", "accelerate~=0.15.0\n", "accelerate", "0.16", True),
    ("requirements.txt", "accelerate~=0.15\n", "accelerate", "0.16", False),  # ~=0.15 allows 0.16
    ("requirements.txt", "accelerate<=0.16\n", "accelerate", "0.16", False),
    ("requirements.txt", "accelerate==0.15.0; python_version < '3.8'\n", "accelerate", "0.16", False),
    ("requirements.txt", "-r requirements/base.txt\n", "torch", "1.1", True),
    ("requirements-gpu.txt", "torch==0.4.1+cu92\n", "torch", "1.1", True),
    ("setup.py", "from setuptools import setup\nREQS = ['torch==1.0.1']\nsetup(name='x', install_requires=REQS)\n",
     "torch", "1.1", True),
    ("setup.cfg", "[options]\ninstall_requires =\n    numpy\n    torch<1.1\n", "torch", "1.1", True),
    ("environment.yml", "dependencies:\n  - pytorch=1.0\n  - pip\n", "torch", "1.1", True),
    ("environment.yml", "dependencies:\n  - pip:\n    - torch==1.0.0\n  - numpy=1.16\n", "torch", "1.1", True),
    ("environment.yml", "dependencies:\n  - pip:\n    - -r requirements/base.txt\n", "torch", "1.1", True),
    ("environment.yml", "dependencies:\n  - pytorch>=1.0\n", "torch", "1.1", False),
])
def test_pins_read_from_each_kind_of_file(tmp_path: Path, name: str, text: str, package: str, version: str,
                                          expected: bool) -> None:
    _write(tmp_path, {name: text})
    if "-r " in text:
        _write(tmp_path, {"requirements/base.txt": "torch==1.0.1\n"})
    assert pins_of(tmp_path).below(package, version) is expected


def test_pyproject_dependencies(tmp_path: Path) -> None:
    _write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['accelerate==0.14.0', 'torch>=2']\n"})
    pins = pins_of(tmp_path)
    assert pins.below("accelerate", "0.16") and not pins.below("torch", "1.1")


@pytest.mark.parametrize(("constraint", "expected"), [
    ('"^0.15.0"', True),  # caret on 0.x allows 0.15.x only
    ('"^0.15"', True),
    ('"^0"', False),  # < 1.0
    ('"~0.15.2"', True),
    ('"0.15.0"', True),  # a bare version is exact
    ('"0.15.*"', True),
    ('">=0.12,<0.16"', True),
    ('">= 0.12 < 0.16"', True),
    ('">=0.12"', False),
    ('"*"', False),
    ('"^0.14 || ^1.0"', False),  # an alternative leaves the top open
    ('{version = "^0.15", optional = true}', True),
    ('{version = "^0.15", markers = "sys_platform == \'linux\'"}', False),  # may not apply
    ('[{version = "^0.15", python = "<3.8"}, {version = "^1.0", python = ">=3.8"}]', False),
])
def test_poetry_dependencies(tmp_path: Path, constraint: str, expected: bool) -> None:
    _write(tmp_path, {"pyproject.toml": f"[tool.poetry.dependencies]\npython = \"^3.8\"\naccelerate = {constraint}\n"})
    assert pins_of(tmp_path).below("accelerate", "0.16") is expected


def test_poetry_dependency_groups(tmp_path: Path) -> None:
    _write(tmp_path, {"pyproject.toml": "[tool.poetry.group.train.dependencies]\ntorch = \"1.0.1\"\n"
                                        "[tool.poetry.dev-dependencies]\naccelerate = \"^0.15\"\n"})
    pins = pins_of(tmp_path)
    assert pins.below("torch", "1.1") and pins.below("accelerate", "0.16")


def test_accelerate_before_0_16_steps_a_prepared_scheduler_on_every_call(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {"scripts/__init__.py": "", "scripts/trainer.py": ACCELERATE_LOOP,
                     "run.py": "from scripts.trainer import main\n"})
    assert _codes(run_cli, "scripts/trainer.py") == ["LC303"]  # current Accelerate: a quarter of the run
    _write(project, {"requirements.txt": "accelerate==0.15.0\ntransformers>=4.25.1\n"})
    assert _codes(run_cli, "scripts/trainer.py") == []  # the cached result is not reused: the pin changed
    _write(project, {"requirements.txt": "accelerate>=0.16.0\ntransformers>=4.25.1\n"})
    assert _codes(run_cli, "scripts/trainer.py") == ["LC303"]


def test_torch_before_1_1_stepped_the_scheduler_first(project: Path, run_cli) -> None:
    _write(project, {"train.py": SCHEDULER_FIRST})
    assert _codes(run_cli, "train.py") == ["LC302"]
    _write(project, {"requirements.txt": "numpy==1.12.1\ntorch==0.4.1\ntorchvision==0.2.0\n"})
    assert _codes(run_cli, "train.py") == []
    _write(project, {"requirements.txt": "numpy==1.12.1\ntorch>=1.1\n"})
    assert _codes(run_cli, "train.py") == ["LC302"]


def test_pin_files_that_disagree_leave_the_version_open(tmp_path: Path) -> None:
    # PixArt-sigma: the README installs requirements.txt (accelerate 0.25); a stale environment.yml pins 0.15
    (tmp_path / ".git").mkdir()
    (tmp_path / "environment.yml").write_text("dependencies:\n  - pip:\n    - accelerate==0.15.0\n")
    forget()
    assert pins_of(tmp_path).below("accelerate", "0.16")
    (tmp_path / "requirements.txt").write_text("accelerate==0.25.0\n")
    forget()
    assert not pins_of(tmp_path).below("accelerate", "0.16")
    (tmp_path / "requirements.txt").write_text("accelerate>=0.20\n")
    forget()
    assert not pins_of(tmp_path).below("accelerate", "0.16")
