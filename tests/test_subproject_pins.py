"""A repository of several sub-projects (a research monorepo: one folder per paper, each with its own
requirements.txt) pins torch per folder: a file reads the pins of the nearest folder, from its own up
to the project root, whose pin files name the package. So LC206 is silent in a folder pinned to an
old torch and reports in a sibling folder that pins none or leaves torch open."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from loopcheck.project.pins import Pins, pins_for

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


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC206", path)
    return [line.split(": ", 1)[1].split()[0] for line in out.splitlines() if ": LC" in line]


def test_a_subproject_pinned_to_an_old_torch_is_silent(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {"AutoFormer/requirements.txt": "torch==1.7.0\ntimm==0.3.2\n", "AutoFormer/engine.py": TRAINER,
                     "TinyViT/requirements.txt": "timm==0.4.12\n", "TinyViT/main.py": TRAINER})
    assert _codes(run_cli, "AutoFormer/engine.py") == []
    assert _codes(run_cli, "TinyViT/main.py") == ["LC206", "LC206"]  # names no torch: today's torch


def test_the_nearest_folder_that_names_torch_decides(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {"requirements.txt": "torch==1.7.0\n", "old/train.py": TRAINER,
                     "new/requirements.txt": "torch>=1.9.0\n", "new/train.py": TRAINER,
                     "docs/requirements.txt": "sphinx==7.1\n", "docs/example.py": TRAINER})
    assert _codes(run_cli, "old/train.py") == []  # the root's pin
    assert _codes(run_cli, "new/train.py") == ["LC206", "LC206"]  # its own, open, requirement
    assert _codes(run_cli, "docs/example.py") == []  # its folder names no torch: the root's pin holds


def test_pins_for_merges_by_package(tmp_path: Path) -> None:
    _write(tmp_path, {"requirements.txt": "torch==1.7.0\naccelerate==0.15.0\n", "sub/requirements.txt": "torch>=2.0\n"})
    pins = pins_for(tmp_path / "sub" / "deep" / "train.py", tmp_path)
    assert not pins.below("torch", "2.4") and pins.below("accelerate", "0.16")
    assert isinstance(pins, Pins) and "torch" in pins.named


SCALER_AND_AUTOCAST = """
    import torch
    from torch.cuda.amp import autocast


    def train(model, loader, optimizer):
        scaler = torch.cuda.amp.GradScaler(enabled=True)
        for x, y in loader:
            optimizer.zero_grad()
            with autocast(dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
"""


def _fixes(run_cli) -> dict[str, bool]:
    """Each LC206 finding's deprecated name -> whether its fix is safe."""
    _, out, _ = run_cli("check", "-q", "--no-cache", "--select", "LC206", "--output-format", "json", "train.py")
    return {f["message"].split("`")[1]: f["fix"]["applicability"] == "safe" for f in json.loads(out) if f["fix"]}


def test_a_floor_below_the_new_api_makes_its_rewrite_unsafe(project: Path, run_cli) -> None:
    _write(project, {"train.py": SCALER_AND_AUTOCAST})
    assert _fixes(run_cli) == {"torch.cuda.amp.GradScaler": True, "torch.cuda.amp.autocast": True}  # no pin
    _write(project, {"requirements.txt": "torch>=2.0.0\n"})
    # torch.amp.GradScaler arrived in 2.3, torch.amp.autocast in 1.10
    assert _fixes(run_cli) == {"torch.cuda.amp.GradScaler": False, "torch.cuda.amp.autocast": True}
    _write(project, {"requirements.txt": "torch>=1.7.0\n"})
    assert _fixes(run_cli) == {"torch.cuda.amp.GradScaler": False, "torch.cuda.amp.autocast": False}
    _write(project, {"requirements.txt": "torch>=2.4\n"})
    assert _fixes(run_cli) == {"torch.cuda.amp.GradScaler": True, "torch.cuda.amp.autocast": True}
