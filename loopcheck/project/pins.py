"""The versions a project pins its dependencies to, read from its pin files at the project root.

Where a library changed behaviour between versions, code written for a pinned older version gets the
older behaviour: Accelerate before 0.16 steps a prepared scheduler on every call (no gradient
accumulation gate), torch before 1.1 wanted ``scheduler.step()`` before ``optimizer.step()``.

Read: ``requirements*.txt`` and ``requirements/*.txt`` (with the files they include by ``-r``),
``setup.py`` / ``setup.cfg`` ``install_requires``, ``pyproject.toml`` ``[project].dependencies`` and Poetry's ``[tool.poetry]`` tables, and
``environment.yml`` / ``environment.yaml`` (conda and ``pip:`` entries). Only a requirement that
bounds the version from above decides (``==``, ``<``, ``<=``, ``~=``, conda's ``=``): a lower bound
or no pin may install today's release, so the current behaviour holds. Where the root's pin files do
not name torch, the torch versions its README, INSTALL and install scripts name decide in their place
(``loopcheck.project.documented``; a sub-project folder's own documents speak for its files).

>>> pins = Pins({"accelerate": [(0, 16)]})
>>> pins.below("accelerate", "0.16"), pins.below("torch", "1.1")
(True, False)
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from loopcheck.config import toml_parser
from loopcheck.patterns import Pattern
from loopcheck.project.index import marked_folder, real_path

_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "environment.yml", "environment.yaml")
_REQUIREMENTS = Pattern(r"requirements.*\.txt$", re.IGNORECASE)
_MAX_BYTES = 200_000
_NAME = Pattern(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")  # name, [extras], clauses
_CLAUSE = Pattern(r"^(===|==|~=|<=|<|=)\s*v?([0-9][0-9a-zA-Z.*+]*)")  # only the bounds from above
_CONDA_NAMES = {"pytorch": "torch"}

Version = tuple[int, ...]


@dataclass(frozen=True)
class Pins:
    """Each pinned package's exclusive upper bounds (``==0.15.0`` gives 0.15.0.1: nothing newer); its
    ``repr`` goes into the cache digest, so a changed pin invalidates cached results."""

    bounds: dict[str, list[Version]]
    named: tuple[str, ...] = ()  # every package the pin files name, bounded from above or not (sorted)
    floors: tuple[tuple[str, Version], ...] = ()  # the lowest version a lower bound allows (`torch>=2.0`)
    # the upper bounds of the torch versions the README, INSTALL and install scripts name
    # (``loopcheck.project.documented``) of the root, or of the nearest folder whose own documents
    # name torch; read only where no pin file names torch
    documented: tuple[Version, ...] = ()

    def below(self, package: str, version: str) -> bool:
        """Whether the project pins ``package`` below ``version``: every version a pin allows is older
        (for torch, where no pin file names it, every version its documents name). Pin files that
        disagree (PixArt-sigma's ``environment.yml`` at ``accelerate==0.15.0``, its ``requirements.txt``,
        which the README installs, at ``0.25.0``) leave the version open: not below."""
        limit = _trim(_version(version))
        name = _normal(package)
        bounds = self.bounds.get(name, ())
        return bool(bounds) and all(bound <= limit for bound in bounds) and not any(
            n == name and floor >= limit for n, floor in self.floors) or \
            name == "torch" and self.documents_torch_below(version)

    def allows_below(self, package: str, version: str) -> bool:
        """Whether a lower bound the pins name allows a version older than ``version`` (``torch>=2.0``
        declares torch 2.0 supported): code rewritten for ``version`` would break there."""
        limit = _trim(_version(version))
        return any(name == _normal(package) and floor < limit for name, floor in self.floors)

    def documents_torch_below(self, version: str) -> bool:
        """Whether the project documents only a torch older than ``version`` (a README's ``conda install
        pytorch==1.13.0``, "PyTorch 1.10.1" under Installation) where no pin file names torch: the pin
        files win (a lower bound or a bare ``torch`` there allows today's release, as AutoGPTQ's
        ``torch>=1.13.0`` under a README whose wheels are "compatible with PyTorch 2.0.1"), and so
        does any statement of the documents that allows newer releases ("PyTorch 1.12+")."""
        limit = _trim(_version(version))
        return bool(self.documented) and "torch" not in self.named and all(b <= limit for b in self.documented)


def pins_of(root: Path) -> Pins:
    """The pins of the project at ``root``, with the torch versions its documents name (read once
    per run)."""
    return _root_pins(real_path(root))


def pins_for(path: Path, root: Path) -> Pins:
    """The pins that hold for the file ``path`` of the project at ``root``: for each package, those of
    the nearest directory from the file's up to the root whose pin files name it. A sub-project of a
    repository (one folder of a research monorepo) pins its own torch in its own requirements.txt."""
    return _pins_for(real_path(path).parent, real_path(root))


@lru_cache(maxsize=4096)  # the files of one directory share it
def _pins_for(directory: Path, root: Path) -> Pins:
    if directory == root or root not in directory.parents:
        return _nested_root_pins(root)
    outer = _pins_for(directory.parent, root)
    pins = outer
    if _pin_files(directory):
        own = _pins_of(directory)
        bounds = {name: found for name, found in outer.bounds.items() if name not in own.named}
        bounds.update(own.bounds)
        floors = tuple(sorted({*(f for f in outer.floors if f[0] not in own.named), *own.floors}))
        pins = Pins(bounds, tuple(sorted({*outer.named, *own.named})), floors, outer.documented)
    if "torch" not in pins.named:
        # a sub-project's own README or install script (`pip3 install torch` in protein/README.md
        # under a root install.sh that installs torch 1.9.1) speaks for its files
        own_documented = _documented(directory)
        if own_documented:
            pins = Pins(pins.bounds, pins.named, pins.floors, own_documented)
    return pins


@lru_cache(maxsize=64)
def _nested_root_pins(root: Path) -> Pins:
    """The root's pins, and where its pin files do not name torch and the root is a folder nested in
    an outer root (a vendored package's own ``setup.py`` inside a sub-project whose requirements.txt
    pins torch==1.13.1), the torch pins of the nearest folder above it, up to the outer root, whose
    pin files name torch: the package runs in the environment of the project that vendors it. As
    within a root, pin files win over documents (a vendored detectron2's "PyTorch >= 1.8" states what
    the library supports, not what the project installs), and the nearest documents decide where no
    pin file names torch. Only the pins look above the root: the project index and its facts stay
    the nested root's."""
    pins = _root_pins(root)
    if "torch" in pins.named or os.path.exists(root / ".git"):
        return pins  # a root with its own repository is its own environment
    outer = _outer_root(root)
    if outer is None:
        return pins
    above = _pins_for(root.parent, outer)
    if "torch" in above.named:
        bounds = dict(pins.bounds)
        if "torch" in above.bounds:
            bounds["torch"] = above.bounds["torch"]
        floors = tuple(sorted({*pins.floors, *(f for f in above.floors if f[0] == "torch")}))
        return Pins(bounds, tuple(sorted({*pins.named, "torch"})), floors, ())
    if above.documented and not pins.documented:
        return Pins(pins.bounds, pins.named, pins.floors, above.documented)
    return pins


@lru_cache(maxsize=64)
def _outer_root(root: Path) -> Path | None:
    """The root that encloses the project root ``root``: the nearest folder above it that holds a
    repository (``.git``), else the outermost folder above it with a project marker; None if none."""
    outer = None
    directory = marked_folder(root.parent) if root.parent != root else None
    while directory is not None:
        if os.path.exists(directory / ".git"):
            return directory
        outer = directory
        directory = marked_folder(directory.parent) if directory.parent != directory else None
    return outer


@lru_cache(maxsize=64)
def _root_pins(root: Path) -> Pins:
    """The root's pins, and where they do not name torch, the torch versions its documents name
    (their ``repr`` is in the cache digest: an edited README invalidates what depended on it)."""
    pins = _pins_of(root)
    return pins if "torch" in pins.named else Pins(pins.bounds, pins.named, pins.floors, _documented(root))


@lru_cache(maxsize=4096)
def _documented(directory: Path) -> tuple[Version, ...]:
    from loopcheck.project.documented import torch_bounds  # only for a project with no torch pin

    return torch_bounds(directory)


def forget() -> None:
    _pin_files.cache_clear()
    _pins_of.cache_clear()
    _pins_for.cache_clear()
    _root_pins.cache_clear()
    _nested_root_pins.cache_clear()
    _outer_root.cache_clear()
    _documented.cache_clear()


@lru_cache(maxsize=4096)
def _pin_files(root: Path) -> tuple[Path, ...]:
    found = []
    for directory in (root, root / "requirements"):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if (directory == root and name in _FILES) or (_REQUIREMENTS.match(name) if directory == root
                                                          else name.endswith(".txt")):
                found.append(directory / name)
    return tuple(found)


@lru_cache(maxsize=64)
def _pins_of(root: Path) -> Pins:
    bounds: dict[str, list[Version]] = {}
    named: set[str] = set()
    floors: set[tuple[str, Version]] = set()
    seen: set[Path] = set()
    for path in _pin_files(root):
        for spec, conda in _requirements(path, seen):
            parsed = _bound(spec, conda)
            if parsed is not None:
                bounds.setdefault(parsed[0], []).append(parsed[1])
            name = _name(spec, conda)
            if name is not None:
                named.add(name)
            floor = _floor(spec)
            if name is not None and floor is not None:
                floors.add((name, floor))
    return Pins(bounds, tuple(sorted(named)), tuple(sorted(floors)))


def _requirements(path: Path, seen: set[Path]) -> list[tuple[str, bool]]:
    """The requirement strings of one pin file, each with whether it is a conda spec."""
    if path in seen:
        return []
    seen.add(path)
    try:
        if path.stat().st_size > _MAX_BYTES:
            return []
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return []
    name = path.name
    if name == "setup.py":
        return [(s, False) for s in _setup_py(text)]
    if name == "setup.cfg":
        return [(s, False) for s in _setup_cfg(text)]
    if name == "pyproject.toml":
        return [(s, False) for s in _pyproject(text)]
    if name.startswith("environment."):
        return _environment(text, path, seen)
    return _requirements_txt(text, path, seen)


def _requirements_txt(text: str, path: Path, seen: set[Path]) -> list[tuple[str, bool]]:
    found: list[tuple[str, bool]] = []
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            found += _requirements(path.parent / line.split(None, 1)[1].strip(), seen)
        elif line and not line.startswith(("#", "-")):
            found.append((line, False))
    return found


def _environment(text: str, path: Path, seen: set[Path]) -> list[tuple[str, bool]]:
    """conda's ``dependencies:`` list, read by line (no YAML parser needed for ``- name=version``);
    entries indented under ``- pip:`` are pip requirements."""
    found: list[tuple[str, bool]] = []
    pip_indent = None
    for line in text.splitlines():
        item = re.match(r"^(\s*)-\s+(.*?)\s*(#.*)?$", line)
        if item is None:
            continue
        indent, value = len(item.group(1)), item.group(2).strip("'\"")
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if value == "pip:":
            pip_indent = indent
        elif value.startswith(("-r ", "--requirement ")):
            found += _requirements(path.parent / value.split(None, 1)[1].strip(), seen)
        else:
            found.append((value, pip_indent is None))
    return found


def _setup_py(text: str) -> list[str]:
    """``install_requires=[...]`` of string literals, or a module-level name bound to such a list."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lists: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            lists[node.targets[0].id] = node.value
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            value = lists.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
            if isinstance(value, (ast.List, ast.Tuple)):
                found += [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return found


def _setup_cfg(text: str) -> list[str]:
    import configparser  # only a project with a setup.cfg: not at every start

    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
        value = parser.get("options", "install_requires", fallback="")
    except configparser.Error:
        return []
    return [line.strip() for line in value.splitlines() if line.strip()]


def _pyproject(text: str) -> list[str]:
    """``[project].dependencies``, and Poetry's dependency tables with their constraints written as
    the requirement strings they mean."""
    tomllib = toml_parser()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    dependencies = _get(data, "project", "dependencies")
    found = [d for d in dependencies if isinstance(d, str)] if isinstance(dependencies, list) else []
    poetry = _get(data, "tool", "poetry")
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    groups = poetry.get("group")
    tables += [_get(g, "dependencies") for g in groups.values()] if isinstance(groups, dict) else []
    for table in tables:
        for name, constraint in table.items() if isinstance(table, dict) else ():
            if isinstance(constraint, dict):
                constraint = constraint.get("version") if not {"markers", "python", "platform"} & constraint.keys() else None
            clauses = _poetry_clauses(constraint) if isinstance(constraint, str) else None
            if clauses:
                found.append(f"{name} {','.join(clauses)}")
    return found


def _get(data: object, *keys: str) -> dict:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, (dict, list)) else {}


def _poetry_clauses(constraint: str) -> list[str] | None:
    """Poetry's ``^0.15.0``, ``~0.15``, ``0.15.0``, ``>=1,<2`` as PEP 440 clauses; None where a
    ``||`` alternative leaves the top open to judgement."""
    if "||" in constraint:
        return None
    clauses = []
    for clause in re.findall(r"[\^~<>=!]*\s*[0-9][0-9a-zA-Z.*+]*", constraint):
        clause = clause.replace(" ", "")
        op, version = re.match(r"([\^~<>=!]*)(.*)", clause).groups()
        parts = _version(version)
        if op in ("^", "~") and parts:
            bump = next((i for i, part in enumerate(parts) if part), len(parts) - 1) if op == "^" \
                else min(1, len(parts) - 1)
            clauses.append("<" + ".".join(map(str, (*parts[:bump], parts[bump] + 1))))
        else:
            clauses.append(clause if op else "==" + clause)
    return clauses


def _name(spec: str, conda: bool) -> str | None:
    """The package a requirement names (conda's ``pytorch`` is ``torch``)."""
    named = _NAME.match(spec.strip())
    if named is None or "://" in spec:
        return None
    return _normal(_CONDA_NAMES.get(named.group(1).lower(), named.group(1)) if conda else named.group(1))


def _floor(spec: str) -> Version | None:
    """The lowest version a ``>=``, ``>`` or ``~=`` clause of a requirement allows."""
    named = _NAME.match(spec.strip())
    if named is None or ";" in spec or "://" in spec:
        return None
    floors = [_trim(_version(m.group(2))) for clause in named.group(2).split(",")
              if (m := re.match(r"^(>=|>|~=)\s*v?([0-9][0-9a-zA-Z.*+]*)", clause.strip())) is not None]
    return min(floors) if floors else None


def _bound(spec: str, conda: bool) -> tuple[str, Version] | None:
    """(package, exclusive upper bound) of a requirement that bounds its version from above; None for
    a lower bound only, no version, an environment marker (the pin may not apply) or a URL."""
    named = _NAME.match(spec.strip())
    if named is None or ";" in spec or "://" in spec:
        return None
    name = _CONDA_NAMES.get(named.group(1).lower(), named.group(1)) if conda else named.group(1)
    bounds = []
    for clause in named.group(2).split(","):
        match = _CLAUSE.match(clause.strip())
        if match is not None and (match.group(1) != "=" or conda):
            bounds.append(_upper(match.group(1), match.group(2).split("+")[0]))
    return (_normal(name), min(bounds)) if bounds else None


def _upper(op: str, version: str) -> Version:
    wildcard = version.endswith(".*")
    parts = _version(version[:-2] if wildcard else version)
    if not parts:
        return (1 << 30,)
    if op == "<":
        return _trim(parts)
    if op == "~=" and len(parts) > 1:
        return _trim((*parts[:-2], parts[-2] + 1))  # ~=0.15.0 allows 0.15.x
    if op == "=" or wildcard:
        return _trim((*parts[:-1], parts[-1] + 1))  # conda's `=0.15` and `==0.15.*` allow 0.15.x
    return (*_trim(parts), 1)  # == or <=: that version and nothing newer (0.15.0 < 0.15.0.1)


def _version(text: str) -> Version:
    """The leading numeric release parts (``1.8.5.post0`` -> (1, 8, 5); a pre-release counts as its
    release)."""
    parts = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(parts)


def _trim(parts: Version) -> Version:
    """Without trailing zeros, so that 0.16 and 0.16.0 compare equal."""
    while parts and parts[-1] == 0:
        parts = parts[:-1]
    return parts


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
