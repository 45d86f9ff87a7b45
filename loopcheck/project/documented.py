"""The torch version a project documents outside its pin files, read in one folder: the project
root, or a sub-project's folder (``loopcheck.project.pins`` decides which, and when).

Many research repositories pin nothing in a requirements file and say in their README which torch
they were built on: ``conda install pytorch==1.13.0 ...`` in a code block, ``pip install
torch==1.9.1+cu111`` in ``install.sh``, "We use Python 3.8, PyTorch 1.10.1" under Installation.

Read, in the ``*.sh`` scripts of the folder and of its ``scripts/``, and in the folder's ``README*``
and ``INSTALL*`` files:

- install commands (``pip install``, ``pip3 install``, ``python -m pip install``, ``conda`` /
  ``mamba install`` or ``create``): ``torch==2.1.2``, ``torch==1.8.0+cu111``, ``pytorch==1.13.0``,
  conda's ``pytorch=1.10``; in the README and INSTALL files on any line;
- in their fenced code blocks, a line that is a requirement (``torch==1.8.0``);
- in their sections headed Requirements, Dependencies, Prerequisites, Installation, Environment or
  Setup (all of an INSTALL file): a requirement (``- torch==1.8.0``, ``PyTorch == 1.11.0``) or a
  version written right after the name (``PyTorch 1.10.1``, ``pytorch v1.7.1``, ``[PyTorch](...)
  2.1.2``, "tested using pytorch 1.7.1"); ``PyTorch 1.13`` allows 1.13.x. Outside those sections, a
  version the line says the project requires or was tested, developed or implemented with
  ("*(requires Pytorch 1.0)*" under the title, Fixup's README). A list item or line that
  names such a section ("0. Requirements:", "**Dependencies**: PyTorch 1.7.1") opens one too;
- a shields.io badge labelled PyTorch (``https://img.shields.io/badge/pytorch-v1.0.0-green.svg``).

A statement that leaves the version open upwards anywhere in these files (``PyTorch 1.12+``,
``PyTorch >= 1.9``, "1.10 or later", "at least 1.10", ``pip install torch`` without a version,
``torch>=2.0``, "higher versions should also work") is an open bound: the project says it runs on today's torch.

>>> _prose("- The repo is developed with Pytorch 1.13, using cuda 11.7")
[(1, 14)]
>>> _prose("VALL-E X works well on both CPU and GPU (`pytorch 2.0+`, CUDA 11.7)")
[(1073741824,)]
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from loopcheck.patterns import Pattern
from loopcheck.project import pins as _pins

Version = tuple[int, ...]
OPEN: Version = (1 << 30,)  # a statement that allows every newer torch
_MAX_BYTES = 200_000
_DOCUMENT = Pattern(r"^(readme|install)[^/]*?(\.(md|markdown|rst|txt))?$", re.IGNORECASE)
_INSTALL = Pattern(r"\b(?:pip3?|python3?\s+-m\s+pip|uv\s+pip|conda|mamba|micromamba)\s+(?:install|create)\b(.*)",
                   re.IGNORECASE)
_HEADING = Pattern(r"^\s{0,3}#{1,6}\s+(.*)$")
_SECTION = Pattern(r"requirement|dependenc|prerequisite|install|environment|setup|set up", re.IGNORECASE)
_FENCE = Pattern(r"^\s*(```|~~~)")
_LINK = Pattern(r"!?\[([^\]]*)\]\([^)]*\)")  # [PyTorch](https://pytorch.org) -> PyTorch
_URL = Pattern(r"\S*://\S*")
_LIST = Pattern(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SPEC = Pattern(r"^(?:py)?torch\s*(?:===|==|~=|<=|>=|<|>|=)", re.IGNORECASE)
_CLAUSES = r"(?:===|==|~=|<=|>=|!=|<|>|=)\s*v?[0-9][0-9a-zA-Z.*+]*"
_REQUIREMENT = Pattern(rf"^(?:py)?torch\s*({_CLAUSES}(?:\s*,\s*{_CLAUSES})*)", re.IGNORECASE)
# the name, then what may stand between it and the version: "PyTorch 1.10.1", "pytorch v1.7.1",
# "torch version 1.8", "PyTorch install 1.7.1", "PyTorch: 1.11", "PyTorch (>=1.8.0)", "torch==1.8.0"
_NAMED = Pattern(r"\b(?:py)?torch\b(?!\s*(?:vision|audio|text)\b)[\s:(]*(?:at\s+least\s+|version\s+|install(?:ed)?\s+|"
                 r"release\s+)?(?P<op>>=|=>|≥|>|===|==|~=|<=|<|=)?\s*v?(?P<version>\d+\.\d+(?:\.\d+)*)", re.IGNORECASE)
_LOWER_BEFORE = Pattern(r"(?:at\s+least|minimum|min\.?|newer\s+than|>=|≥|>)\s*v?$", re.IGNORECASE)
# after the version: "+" (not a local version's "+cu111"), ".x+", "or later", "and above", "onwards"
_LOWER_AFTER = Pattern(r"^(?:\.x)?(?:\+(?![a-z0-9])|"
                       r"\s*\)?,?\s*(?:or|and)\s+(?:later|newer|above|higher|greater|up|more)\b|"
                       r"\s+(?:or\s+)?(?:above|onwards|later|newer|higher)\b)", re.IGNORECASE)
# a shields.io badge: `![pytorch](https://img.shields.io/badge/pytorch-v1.0.0-green.svg)` (label-message-color)
_BADGE = Pattern(r"img\.shields\.io/badge/([^/?#)\s\"']+)", re.IGNORECASE)
# a line that opens a requirements list without a heading: "0. Requirements:", "**Dependencies**:"
_LABEL = Pattern(r"^(?:requirements?|dependencies|prerequisites?|environment|installation|setup)\s*:?\s*(.*)$",
                 re.IGNORECASE)
_RANGE = Pattern(r"^\s*(?:-|~|to)\s*v?\d")
# a version the project says it needs or was made with, on any line: "(requires Pytorch 1.0)",
# "tested with PyTorch 1.4", "developed with Pytorch 1.13"
_STATED = Pattern(r"\b(?:requires?|required|tested|developed|implemented)\b", re.IGNORECASE)
# "Higher version pytorch should also work well", "newer versions of PyTorch"
_NEWER = Pattern(r"\b(?:higher|newer|later)\s+(?:\w+\s+)?versions?\b", re.IGNORECASE)
# options of pip and conda that take a value (the next word is no package: `-c pytorch`)
_TAKES_VALUE = frozenset({"-c", "--channel", "-f", "--find-links", "-i", "--index-url", "--extra-index-url", "-r",
                          "--requirement", "-e", "--editable", "-n", "--name", "-p", "--prefix", "-t", "--target",
                          "--python", "-C", "--config-settings", "--constraint", "--upgrade-strategy", "--platform",
                          "--only-binary", "--no-binary", "--root", "--src", "--cache-dir", "--trusted-host"})


def torch_bounds(root: Path) -> tuple[Version, ...]:
    """The exclusive upper bounds of each torch the documents at ``root`` name (``OPEN`` for one
    that allows every newer torch), sorted and without repeats."""
    return tuple(sorted({bound for bound, _, _ in statements(root)}))


def statements(root: Path) -> list[tuple[Version, Path, int]]:
    """(bound, file, line number) of each statement about the torch version in the documents at
    ``root``."""
    found = []
    for path in _documents(root):
        try:
            if path.stat().st_size > _MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "torch" not in text.lower():
            continue
        read = _script if path.suffix == ".sh" else _document
        found += [(bound, path, number) for bound, number in read(text, path.name.lower().startswith("install"))]
    return found


def _documents(root: Path) -> list[Path]:
    found = []
    for directory in (root, root / "scripts"):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.endswith(".sh") or (directory == root and _DOCUMENT.match(name)):
                found.append(directory / name)
    return [path for path in found if path.is_file()]


def _script(text: str, _whole: bool) -> list[tuple[Version, int]]:
    """Install commands of a shell script (comment lines are not commands)."""
    return [(bound, number) for number, line in _joined(text.splitlines())
            if not line.lstrip().startswith("#") for bound in _install(line)]


def _document(text: str, whole: bool) -> list[tuple[Version, int]]:
    """Install commands on any line; requirements in code blocks; requirements and versions named in
    prose under a requirements-like heading (anywhere in an INSTALL file); and every open statement."""
    found: list[tuple[Version, int]] = []
    fenced, section = False, whole
    lines = text.splitlines()
    for number, line in _joined(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            heading = _HEADING.match(line)
            underlined = number < len(lines) and re.match(r"^\s*(=+|-+)\s*$", lines[number]) and line.strip() \
                and not _LIST.match(line)
            if heading is not None or underlined:
                section = whole or bool(_SECTION.search(heading.group(1) if heading is not None else line))
                continue
        label = _LABEL.match(_LIST.sub("", line.replace("**", "")).strip()) if not fenced else None
        if label is not None:
            section, line = True, label.group(1)
        if "torch" not in line.lower():
            continue
        badges = [bound for badge in _BADGE.finditer(line) for bound in _badge(badge.group(1))]
        found += [(bound, number) for bound in badges]
        if fenced and line.lstrip().startswith("#"):
            continue  # a comment in a code block: an alternative left out, not a command
        commands = _install(line)
        found += [(bound, number) for bound in commands]
        if commands:
            continue
        clean = _LIST.sub("", _URL.sub(" ", _LINK.sub(r"\1", line)).replace("`", "").replace("**", "")).strip()
        spec = _requirement(clean) if _SPEC.match(clean) else None
        if spec is not None and (fenced or section or spec == OPEN):
            found.append((spec, number))
        elif spec is None:
            stated = section or _STATED.search(clean) is not None
            found += [(bound, number) for bound in _prose(clean) if stated or bound == OPEN]
        if _NEWER.search(clean):
            found.append((OPEN, number))
    return found


def _badge(path: str) -> list[Version]:
    """The torch versions a shields.io badge path names (``pytorch-v1.0.0-green.svg``,
    ``PyTorch-%3E%3D1.6-red``): its label must be PyTorch; ``--`` is a dash, ``_`` a space."""
    parts = [unquote(part).replace("\0", "-").replace("_", " ").strip()
             for part in path.replace("--", "\0").split("-")]
    if len(parts) < 3 or parts[0].lower().replace(" ", "") not in ("pytorch", "torch"):
        return []
    return _prose("PyTorch " + "-".join(parts[1:-1]))


def _joined(lines: list[str]) -> list[tuple[int, str]]:
    """(number of the first line, text) with backslash continuations joined."""
    out: list[tuple[int, str]] = []
    start, parts = 0, []
    for number, line in enumerate(lines, 1):
        if not parts:
            start = number
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        out.append((start, " ".join([*parts, line])))
        parts = []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def _install(line: str) -> list[Version]:
    """The bound of each torch a pip or conda install command on the line installs (``OPEN`` for
    one without a version or with a lower bound only)."""
    found = []
    for command in re.split(r"&&|\|\||;|\|", line):
        match = _INSTALL.search(command)
        if match is None:
            continue
        conda = "conda" in command[:match.start(1)].lower() or "mamba" in command[:match.start(1)].lower()
        words = match.group(1).split(" #")[0].split()
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word.startswith("-"):
                skip = word in _TAKES_VALUE
                continue
            word = word.strip("'\"").split("::")[-1]
            if "://" in word or word.startswith(("git+", ".", "/")):
                continue
            name = re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*", word)
            if name is None or name.group().lower() != ("pytorch" if conda else "torch"):
                continue
            found.append(_requirement(word, conda))  # pip has no `torch=1.8`
    return found


def _requirement(spec: str, conda: bool = True) -> Version:
    """The bound of a requirement on torch (``PyTorch == 1.11.0``, conda's ``pytorch=1.10``, a pip
    ``torch==1.9.1+cu111``), ``OPEN`` for a lower bound or none. In a document a single ``=`` is
    conda's (1.10.x); pip has none."""
    match = _REQUIREMENT.match(spec.strip())
    if match is None:
        return OPEN
    found = _pins._bound("torch" + re.sub(r"\s+", "", match.group(1)), conda)
    return found[1] if found is not None else OPEN


def _prose(line: str) -> list[Version]:
    """The bound of each version written after the name torch or PyTorch on a line of prose."""
    found = []
    for match in _NAMED.finditer(line):
        op, version = match.group("op"), match.group("version")
        after = line[match.end():]
        if op in (">=", "=>", "≥", ">") or _LOWER_BEFORE.search(line[:match.start("version")]) or \
                _LOWER_AFTER.match(after) or _RANGE.match(after):
            found.append(OPEN)
        else:
            # a written-out release allows that release only; "PyTorch 1.13" allows every 1.13.x
            found.append(_pins._upper(op or ("==" if version.count(".") > 1 else "="), version))
    return found
