"""How the project documents launching a script: the shell scripts, READMEs, Makefiles, notebooks and
YAML files of the script's folder, of each folder above it up to the project root, and of the root's
``scripts/`` and ``docs/`` folders.

A model prepared by Accelerate is DistributedDataParallel only when several processes run the script
(``accelerate launch``, ``torchrun``, ``deepspeed``, a Slurm ``srun``...); ``python train.py`` runs
one process, and Accelerate then wraps nothing. A project whose every documented launch of a script
is a plain ``python script.py`` (and that says nothing of a multi-process launch in those documents)
shows how it is run; so does one that launches, that way, another training script of the same
folder (a script that back-propagates: ``uv run train_mac.py`` beside ``train_implicit_mlp_attn.py``)
where none of its documents launches this one. The reading is conservative: a multi-process word in
those documents (prose included; a word, so BibTeX's ``@inproceedings`` is no ``nproc``), a script
neither launched nor beside a launched training script, or a folder too large to read, keeps the
question open.
Only those folders are read, each once per run, never the whole tree: the answer is part of the
cache key of every file that imports Accelerate, so it is asked on every run, warm ones too.

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
                 r"|multi[ _-]?gpu|multi[ _-]?node|num[_-]processes|\bnproc|\bdeepspeed\b|\bsrun\b|\bsbatch\b"
                 r"|\bsalloc\b|mpirun|mpiexec|horovod|notebook_launcher|debug_launcher|distributed_type|nnodes"
                 r"|world[_-]size|local[_-]rank|\bddp\b|\bfsdp\b|\bspawn\b|launch(?:er)?\.py|--ntasks|--gpus-per",
                 re.IGNORECASE)
_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".job", ".md", ".rst", ".yaml", ".yml", ".ipynb")
_NAMES = ("makefile", "dockerfile", "justfile", "procfile")
# a script a command names (`python train.py`, `uv run tools/train.py`): its file name
_SCRIPT = Pattern(r"(?:^|[\s/'\"`=(])([\w.-]+\.py)(?![\w.-])", re.MULTILINE)
_DOC_FOLDERS = ("scripts", "docs")  # of the root: where projects keep their launch commands
_MAX_FILES = 500  # documents of one folder
_MAX_BYTES = 1_000_000  # one document


def single_process(path: Path, root: Path) -> bool:
    """Whether the project at ``root`` documents launches of the script ``path`` (or, where it
    documents none, of another training script of the same folder) and every document read for it
    speaks of single-process runs only."""
    documents: list[str] = []
    folder = real_path(path).parent
    for directory in _folders(folder, real_path(root)):
        texts = _single_process_documents(directory)
        if texts is None:
            return False
        documents.extend(texts)
    return _runs(path.name, documents) or _runs_a_sibling(folder, path.name, documents)


def stamps(path: Path, root: Path) -> list[str]:
    """The size and modification time of every document ``single_process`` reads for ``path``, and
    of the scripts of its folder (``_runs_a_sibling`` reads them): what a cached result that used the
    answer depends on (cheaper to ask on a warm run than the answer)."""
    folder = real_path(path).parent
    return [stamp for directory in _folders(folder, real_path(root)) for stamp in _stamps(directory)] \
        + list(_script_stamps(folder))


def _runs_a_sibling(folder: Path, name: str, documents: list[str]) -> bool:
    """A command of the documents runs another script of ``folder`` that back-propagates (a training
    script: ``uv run train_mac.py`` beside ``train_implicit_mlp_attn.py``): the project shows how it
    runs the training scripts it keeps side by side, one process each. A documented data-preparation
    or evaluation script says nothing of how training is launched."""
    named = {found for text in documents for found in _SCRIPT.findall(text)} - {name}
    for script in sorted(named & _scripts(folder)):
        try:
            with open(folder / script, "rb") as handle:
                if b".backward(" in handle.read(_MAX_BYTES):
                    return True
        except OSError:
            continue
    return False


def forget() -> None:
    _single_process_documents.cache_clear()
    _stamps.cache_clear()
    _scripts.cache_clear()
    _script_stamps.cache_clear()


def _folders(directory: Path, root: Path) -> list[Path]:
    """The script's folder and those above it up to ``root``, and the root's documentation folders."""
    found = [directory]
    while directory != root and root in directory.parents:
        directory = directory.parent
        found.append(directory)
    return found + [root / name for name in _DOC_FOLDERS]


def _launched(name: str, documents: list[str]) -> bool:
    """``name`` is run by a command of the documents (``python name``, ``python dir/name``), and
    none of them says anything of several processes."""
    return not any(_MULTI.search(text) for text in documents) and _runs(name, documents)


def _runs(name: str, documents: list[str]) -> bool:
    """A command of the documents runs ``name``."""
    command = re.compile(rf"(?:^|[\s/'\"`=(]){re.escape(name)}(?![\w.-])", re.MULTILINE)
    return any(command.search(text) for text in documents)


@lru_cache(maxsize=4096)  # the scripts of one folder share it
def _single_process_documents(directory: Path) -> list[str] | None:
    """One folder's launch documents where none of them speaks of several processes; None where one
    does, or where there are too many to read (the scripts of every folder below ask it again)."""
    texts = _documents(directory)
    return None if texts is None or any(_MULTI.search(text) for text in texts) else texts


@lru_cache(maxsize=4096)
def _stamps(directory: Path) -> tuple[str, ...]:
    try:
        with os.scandir(directory) as entries:
            found = [entry for entry in entries if _is_document(entry.name.lower())]
        return tuple(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}" for entry in sorted(found, key=lambda e: e.name)
                     if (st := entry.stat()) is not None)
    except OSError:
        return ()


@lru_cache(maxsize=4096)
def _scripts(directory: Path) -> frozenset[str]:
    """The names of the Python scripts of one folder."""
    try:
        return frozenset(name for name in os.listdir(directory) if name.endswith(".py"))
    except OSError:
        return frozenset()


@lru_cache(maxsize=4096)
def _script_stamps(directory: Path) -> tuple[str, ...]:
    try:
        with os.scandir(directory) as entries:
            found = [entry for entry in entries if entry.name.endswith(".py")]
        return tuple(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}" for entry in sorted(found, key=lambda e: e.name)
                     if (st := entry.stat()) is not None)
    except OSError:
        return ()


def _is_document(lower: str) -> bool:
    return lower.endswith(_SUFFIXES) or lower in _NAMES or lower.startswith(("readme", "makefile"))


def _documents(directory: Path) -> list[str] | None:
    """The texts of one folder's launch documents; None where there are too many to read."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    texts: list[str] = []
    for name in names:
        if not _is_document(name.lower()):
            continue
        if len(texts) >= _MAX_FILES:
            return None
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                data = handle.read(_MAX_BYTES + 1)
        except OSError:
            continue  # a folder of that name, or unreadable
        if len(data) > _MAX_BYTES:
            return None  # an unread tail may hold the launch
        texts.append(data.decode("utf-8", errors="replace"))
    return texts
