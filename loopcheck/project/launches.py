"""How the project documents launching a script: its shell scripts, READMEs, Makefiles, notebooks and
YAML files, anywhere under the project root.

A model prepared by Accelerate is DistributedDataParallel only when several processes run the script
(``accelerate launch``, ``torchrun``, ``deepspeed``, a Slurm ``srun``...); ``python train.py`` runs
one process, and Accelerate then wraps nothing. A project whose every documented launch of a script
is a plain ``python script.py`` (and that says nothing of a multi-process launch anywhere) shows how
it is run. The reading is conservative: a multi-process word anywhere in those documents (prose
included), a script no document launches, or a project too large to read, keeps the question open.

>>> _launched("bert.py", ["CUDA_VISIBLE_DEVICES=3 python bert.py --gpus 3", "python distilbert.py"])
True
>>> _launched("train.py", ["python tools/pretrain.py"])
False
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from loopcheck.patterns import Pattern
from loopcheck.project.index import real_path

# a multi-process launch, its configuration, or prose about one
_MULTI = Pattern(r"accelerate[ _-]+launch|accelerate\.commands|torchrun|torch\.distributed|distributed\.launch"
                 r"|multi[ _-]?gpu|multi[ _-]?node|num[_-]processes|nproc|\bdeepspeed\b|\bsrun\b|\bsbatch\b"
                 r"|\bsalloc\b|mpirun|mpiexec|horovod|notebook_launcher|debug_launcher|distributed_type|nnodes"
                 r"|world[_-]size|local[_-]rank|\bddp\b|\bfsdp\b|\bspawn\b|launch(?:er)?\.py|--ntasks|--gpus-per",
                 re.IGNORECASE)
_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".job", ".md", ".rst", ".yaml", ".yml", ".ipynb")
_NAMES = ("makefile", "dockerfile", "justfile", "procfile")
_SKIP = frozenset({"node_modules", "site-packages", "__pycache__", "venv", "env"})
_MAX_FILES = 3000
_MAX_BYTES = 1_000_000  # one document
_MAX_TOTAL = 20_000_000


def single_process(path: Path, root: Path) -> bool:
    """Whether the project at ``root`` documents launches of the script ``path`` and every document
    it has speaks of single-process runs only."""
    documents = _documents(real_path(root))
    return documents is not None and _launched(path.name, documents)


def forget() -> None:
    _documents.cache_clear()


def _launched(name: str, documents: list[str]) -> bool:
    """``name`` is run by a command of the documents (``python name``, ``python dir/name``), and
    none of them says anything of several processes."""
    if any(_MULTI.search(text) for text in documents):
        return False
    command = re.compile(rf"(?:^|[\s/'\"`=(]){re.escape(name)}(?![\w.-])", re.MULTILINE)
    return any(command.search(text) for text in documents)


@lru_cache(maxsize=64)
def _documents(root: Path) -> list[str] | None:
    """The texts of the project's launch documents; None where there are too many to read."""
    texts: list[str] = []
    total = 0
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in _SKIP)
        for name in sorted(files):
            lower = name.lower()
            if not (lower.endswith(_SUFFIXES) or lower in _NAMES or lower.startswith(("readme", "makefile"))):
                continue
            if len(texts) >= _MAX_FILES:
                return None
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    data = handle.read(_MAX_BYTES + 1)
            except OSError:
                continue
            if len(data) > _MAX_BYTES:
                return None  # an unread tail may hold the launch
            total += len(data)
            if total > _MAX_TOTAL:
                return None
            texts.append(data.decode("utf-8", errors="replace"))
    return texts
