"""A repository of several sub-projects (a research monorepo: one folder per paper, each with its own
requirements.txt) pins torch per folder: a file reads the pins of the nearest folder, from its own up
to the project root, whose pin files name the package. So LC206 is silent in a folder pinned to an
old torch and reports in a sibling folder that pins none or leaves torch open."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from loopcheck.project.pins import Pins, pins_for

from tests.projects import OLD_AMP_TRAINER

TRAINER = OLD_AMP_TRAINER


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


# A vendored package keeps its own setup.py (detectron2 copied under a sub-project's third_party/): that
# folder becomes the file's project root, yet the package runs in the environment of the sub-project
# that vendors it. Its library documents ("PyTorch >= 1.8") state what it supports, not what is installed.
VENDORED = {"video_chat/models/third_party/CenterNet2/setup.py": "from setuptools import setup\nsetup(name='d2')\n",
            "video_chat/models/third_party/CenterNet2/INSTALL.md": "### Requirements\n- PyTorch \u2265 1.8\n",
            "video_chat/models/third_party/CenterNet2/detectron2/engine/train_loop.py": TRAINER}
VENDORED_FILE = "video_chat/models/third_party/CenterNet2/detectron2/engine/train_loop.py"


def test_a_vendored_package_takes_the_torch_pin_of_the_sub_project_around_it(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {**VENDORED, "video_chat/requirements.txt": "torch==1.13.1\ntorchvision==0.14.1\n"})
    assert _codes(run_cli, VENDORED_FILE) == []


def test_a_vendored_package_reports_where_the_pin_around_it_allows_2_4_or_is_absent(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {**VENDORED, "video_chat/requirements.txt": "torch>=1.13.1\n"})
    assert _codes(run_cli, VENDORED_FILE) == ["LC206", "LC206"]
    _write(project, {"video_chat/requirements.txt": "numpy==1.24.0\n"})
    assert _codes(run_cli, VENDORED_FILE) == ["LC206", "LC206"]  # names no torch: today's torch


def test_the_vendored_package_s_own_pin_decides(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {**VENDORED, "video_chat/requirements.txt": "torch==1.13.1\n",
                     "video_chat/models/third_party/CenterNet2/setup.py":
                         "from setuptools import setup\nsetup(name='d2', install_requires=['torch>=2.0'])\n"})
    assert _codes(run_cli, VENDORED_FILE) == ["LC206", "LC206"]
    _write(project, {"requirements.txt": "torch>=2.5\n", "video_chat/requirements.txt": "numpy\n",
                     "video_chat/models/third_party/CenterNet2/setup.py":
                         "from setuptools import setup\nsetup(name='d2', install_requires=['torch==1.13.1'])\n"})
    assert _codes(run_cli, VENDORED_FILE) == []


def test_the_pin_above_a_nested_root_stops_at_the_repository(tmp_path: Path) -> None:
    # the folder holding the checkout pins an old torch; the checkout (its own .git) is another project
    _write(tmp_path, {"requirements.txt": "torch==1.7.0\n", "repo/vendor/pkg/setup.py": "", "repo/vendor/pkg/m.py": ""})
    (tmp_path / "repo" / ".git").mkdir()
    pkg = tmp_path / "repo" / "vendor" / "pkg"
    assert not pins_for(pkg / "m.py", pkg).below("torch", "2.4")
    _write(tmp_path, {"repo/requirements.txt": "torch==1.7.0\n"})
    from loopcheck import project as project_module

    project_module.forget()
    assert pins_for(pkg / "m.py", pkg).below("torch", "2.4")
    assert "torch" in repr(pins_for(pkg / "m.py", pkg))  # the cache digest sees the pin above
