"""The torch version a project documents outside its pin files (README, INSTALL, install scripts at
the root): a documented torch older than 2.4 silences LC206 like a pin does, a statement that
allows newer releases does not, the pin files win, and an edited README invalidates the cached
result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project.pins import forget, pins_for, pins_of

from tests.projects import OLD_AMP_TRAINER

TRAINER = OLD_AMP_TRAINER

FENCE = "```"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _documents_old_torch(root: Path, files: dict[str, str]) -> bool:
    forget()
    _write(root, files)
    return pins_of(root).documents_torch_below("2.4")


def _codes(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC206", path)
    return [line.split(": ", 1)[1].split()[0] for line in out.splitlines() if ": LC" in line]


@pytest.mark.parametrize("files", [
    # install commands in a README's code block, on a prompt line, with a local version and an index
    {"README.md": f"## Setup\n{FENCE}\nconda install pytorch==1.13.0 torchvision==0.14.0 pytorch-cuda=11.7 "
                  f"-c pytorch -c nvidia\n{FENCE}\n"},
    {"README.md": f"### Install Dependencies\n{FENCE}\n$ pip install torch==2.1.2 transformers==4.33.0\n{FENCE}\n"},
    {"README.md": "Run `pip install torch==1.8.0+cu111 torchvision==0.9.0+cu111 -f "
                  "https://download.pytorch.org/whl/torch_stable.html` first.\n"},
    {"README.md": f"{FENCE}bash\npip3 install torch==2.0.1 --index-url https://download.pytorch.org/whl/cu118\n"
                  f"{FENCE}\n"},
    {"README.md": f"{FENCE}\nconda create -n env python=3.8 && conda install pytorch=1.10 -c pytorch\n{FENCE}\n"},
    {"INSTALL.md": "conda install -y pytorch==1.10.1 torchvision==0.11.2 cudatoolkit=11.3 -c pytorch\n"},
    # install scripts at the root and in scripts/, a command continued over lines
    {"install.sh": "#!/bin/bash\npip install torch==1.9.1+cu111 torchaudio -f "
                   "https://download.pytorch.org/whl/cu111/torch_stable.html\npip install torch-geometric==1.7.2\n"},
    {"scripts/env.sh": "python -m pip install --upgrade \\\n    torch==1.12.1 \\\n    torchvision==0.13.1\n"},
    # a requirement line in a code block, or under a requirements heading
    {"README.md": f"Tested with:\n{FENCE}\ntorch==1.9.0\ntorchvision==0.10.0\n{FENCE}\n"},
    {"README.md": "### Requirements\n\n- torch==1.8.0\n- torchvision==0.9.0\n- timm==0.4.12\n"},
    {"README.md": "## Dependencies\n\n- Python 3.9\n- PyTorch == 1.11.0\n- torchvision == 0.12.0\n"},
    # a version written after the name, under a requirements-like heading (all of an INSTALL file)
    {"README.md": "## Installation\n\nThe code is developed and tested using pytorch 1.7.1. Other versions of "
                  "pytorch are not fully tested.\n"},
    {"README.md": "## Dependencies\n\n- [PyTorch](https://pytorch.org) 2.1.2\n- transformers 4.33.0\n"},
    {"README.md": "Requirements\n------------\n* Python 3.8\n* PyTorch install 1.7.1\n* CUDA 11.0\n"},
    {"INSTALL.md": "We use:\n\n- [PyTorch v1.10.1](https://pytorch.org/get-started/previous-versions/)\n"},
    {"README.md": "## Dependencies\n\n- The repo is developed with Pytorch 1.13, using cuda 11.7\n"},
    # a shields.io badge labelled PyTorch, with or without a "v"
    {"README.md": "[![PyTorch](https://img.shields.io/badge/pytorch-0.4.0-%237732a8?style=flat-square&logo=PyTorch)]"
                  "(https://pytorch.org/)\n"},
    {"README.md": "![pytorch](https://img.shields.io/badge/pytorch-v1.0.0-green.svg?style=plastic)\n"},
    # a list item that opens a requirements list under a heading of another name
    {"README.md": "## Run\n\n0. Requirements:\n    * python3, pytorch 1.0, torchvision 0.2.1, pyyaml 3.13.\n"},
    {"README.md": "## Usage\n\n**Dependencies**: PyTorch 1.7.1, CUDA 11.0\n"},
    # a version the project says it requires or was tested with, on any line
    {"README.md": "# Fixup\n**A Re-implementation of Fixed-update Initialization. *(requires Pytorch 1.0)***\n"},
    {"README.md": "## Training\n\nThe code was tested with PyTorch 1.4 on two V100s.\n"},
])
def test_a_documented_old_torch(tmp_path: Path, files: dict[str, str]) -> None:
    assert _documents_old_torch(tmp_path, files)


@pytest.mark.parametrize("files", [
    # lower bounds: the project runs on today's torch
    {"README.md": "## Requirements\n\n- PyTorch 1.12+ and corresponding torchvision\n"},
    {"INSTALL.md": "- PyTorch >= 1.9 (Acceleration for 3D depth-wise convolution)\n"},
    {"README.md": "EfficientZero requires python3 (>=3.6) and pytorch (>=1.8.0) with the development headers.\n"},
    {"README.md": "## Installation\n\nPyTorch 1.10 or later.\n"},
    {"README.md": "## Installation\n\nYou need PyTorch at least 1.10.\n"},
    {"README.md": "## Installation\n\n- PyTorch 1.10.1 and above\n"},
    {"README.md": "The main branch works with **Pytorch 1.10+** or higher (we recommend **Pytorch 1.12**).\n"},
    {"README.md": "## Installation\n\nOur code is based on pytorch 1.9.0. Higher version pytorch should also work.\n"},
    {"README.md": f"{FENCE}\npip install 'torch>=2.0'\n{FENCE}\n"},
    {"README.md": "![PyTorch](https://img.shields.io/badge/PyTorch-%3E%3D1.6-red)\n"},
    {"README.md": "![PyTorch](https://img.shields.io/badge/PyTorch-1.4+-blue)\n"},
    # a badge of another label, a version outside any requirements-like list
    {"README.md": "![python](https://img.shields.io/badge/python-3.6-blue) built on PyTorch\n"},
    {"README.md": "## Run\n\n1. Training:\n    * ported from pytorch 1.0 code\n"},
    {"README.md": "## Training\n\nThe code requires PyTorch 1.8 or later.\n"},
    # an install command without a version installs today's torch
    {"README.md": f"{FENCE}\npip install torch torchvision torchaudio\n{FENCE}\n"},
    {"README.md": f"{FENCE}\nconda install pytorch torchvision cudatoolkit=11.3 -c pytorch\n{FENCE}\n"},
    # every version named must be older: one command for a newer CUDA installs 2.5
    {"README.md": f"{FENCE}\npip install torch==1.13.1  # CUDA 11\npip install torch==2.5.1  # CUDA 12\n{FENCE}\n"},
    {"README.md": f"{FENCE}\npip install torch==1.13.1\n{FENCE}\n", "install.sh": "pip install -U torch\n"},
    {"README.md": f"{FENCE}\npip install torch==2.4.0\n{FENCE}\n"},
    # prose outside a requirements-like section, a commented-out command, other packages named torch-*
    {"README.md": "## News\n\n- [2023.03] Support PyTorch 2.0 compile.\n- we use CoreML==5.2 and Torch==1.11\n"},
    {"install.sh": "# pip install torch==1.8.0\n"},
    {"README.md": f"{FENCE}\n# pip install torch==1.8.0\n{FENCE}\n"},
    {"install.sh": "pip install torch-scatter==2.0.9 -f https://pytorch-geometric.com/whl/torch-1.9.1+cu111.html\n"},
    # the root reads only its own documents and scripts/ (a sub-folder speaks for its own files)
    {"docs/README.md": f"{FENCE}\npip install torch==1.8.0\n{FENCE}\n"},
    {"tools/install.sh": "pip install torch==1.8.0\n"},
    {},
])
def test_no_documented_old_torch(tmp_path: Path, files: dict[str, str]) -> None:
    assert not _documents_old_torch(tmp_path, files)


OLD_README = f"## Installation\n{FENCE}\npip install torch==1.13.1\n{FENCE}\n"


@pytest.mark.parametrize(("requirements", "silent"), [
    ("torch==2.5.0\n", False),  # the pin file names torch: the README is not read
    ("torch<3\n", False),
    ("torch>=1.13.0\n", False),  # a lower bound allows today's torch (AutoGPTQ's setup.py)
    ("torch\nnumpy==1.19.5\n", False),  # so does a bare name
    ("numpy==1.19.5\n", True),  # other packages only: the README decides
])
def test_the_pin_files_win(tmp_path: Path, requirements: str, silent: bool) -> None:
    assert _documents_old_torch(tmp_path, {"README.md": OLD_README, "requirements.txt": requirements}) is silent


def test_a_sub_project_s_own_documents_speak_for_its_files(tmp_path: Path) -> None:
    forget()
    _write(tmp_path, {"install.sh": "pip install torch==1.9.1+cu111\n",
                      "protein/requirements.txt": "numpy\n",
                      "protein/README.md": f"{FENCE}\npip3 install torch torchvision torchaudio\n{FENCE}\n",
                      "tools/README.md": "Evaluation tools.\n"})
    assert pins_for(tmp_path / "graphormer" / "train.py", tmp_path).documents_torch_below("2.4")
    assert pins_for(tmp_path / "tools" / "eval.py", tmp_path).documents_torch_below("2.4")  # says nothing of torch
    assert not pins_for(tmp_path / "protein" / "model" / "train.py", tmp_path).documents_torch_below("2.4")


def test_a_documented_old_torch_silences_lc206(project: Path, run_cli) -> None:
    (project / ".git").mkdir()
    _write(project, {"train.py": TRAINER})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]  # nothing documented: today's torch warns
    _write(project, {"README.md": OLD_README})
    assert _codes(run_cli, "train.py") == []  # the cached result is not reused: the README changed
    _write(project, {"README.md": OLD_README + "\nNewer versions of PyTorch work too.\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]
    _write(project, {"README.md": OLD_README, "requirements.txt": "torch==2.5.1\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]  # the pin file wins


def test_an_edit_that_keeps_the_documented_version_keeps_the_cache(project: Path, run_cli,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck import checker

    (project / ".git").mkdir()
    _write(project, {"train.py": TRAINER, "install.sh": "pip install torch==1.9.1\n"})
    assert _codes(run_cli, "train.py") == []
    _write(project, {"install.sh": "pip install numpy==1.21\npip install torch==1.9.1\n"})
    with monkeypatch.context() as patched:
        def fail(job: object) -> None:
            raise AssertionError("a cached file was checked again")

        patched.setattr(checker, "_check_job", fail)
        assert _codes(run_cli, "train.py") == []  # the same documented torch: the cached result holds
    _write(project, {"install.sh": "pip install torch==2.5.1\n"})
    assert _codes(run_cli, "train.py") == ["LC206", "LC206"]
