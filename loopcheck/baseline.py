"""Baselines: adopt loopcheck on an existing repository and gate only new findings.

``loopcheck check --write-baseline loopcheck-baseline.json`` records every current finding as
(code, file, fingerprint, count); ``--baseline loopcheck-baseline.json`` then drops findings that
the file accounts for. Matching is a multiset on code + file + ``Finding.fingerprint`` (a hash of
the flagged code, not its position), so edits that only shift lines keep old findings hidden,
while a second copy of a recorded problem in the same file is still reported. Paths are stored
relative to the baseline file's directory, so the check can run from any directory.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from loopcheck import __version__
from loopcheck.findings import Finding

FORMAT = "loopcheck-baseline"
FORMAT_VERSION = 1

Key = tuple[str, str, str]  # code, file (relative to the baseline), fingerprint


class BaselineError(ValueError):
    """A baseline that cannot be read or written, worded for the user (exit 2)."""


def write(path: Path, findings: Sequence[Finding]) -> int:
    """Record ``findings`` in ``path``; returns how many were recorded."""
    counts = Counter(_key(f, path.parent) for f in findings)
    entries = [{"code": code, "file": file, "fingerprint": fp, "count": n}
               for (code, file, fp), n in sorted(counts.items())]
    data = {FORMAT: FORMAT_VERSION, "loopcheck-version": __version__, "findings": entries}
    if not path.parent.is_dir():
        raise BaselineError(f"cannot write baseline {path}: directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise BaselineError(f"cannot write baseline {path}: {error.strerror or error}") from None
    return len(findings)


def read(path: Path) -> Counter[Key]:
    where = f"baseline {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{where} does not exist (create it with --write-baseline)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BaselineError(f"cannot read {where}: {getattr(error, 'strerror', None) or error}") from None
    except json.JSONDecodeError as error:
        raise BaselineError(f"{where} is not valid JSON ({error.msg} at line {error.lineno})") from None
    except RecursionError:
        raise BaselineError(f"{where} is not a loopcheck baseline (nested too deeply)") from None
    if not isinstance(data, dict) or FORMAT not in data:
        raise BaselineError(f"{where} is not a loopcheck baseline (write one with --write-baseline)")
    if data[FORMAT] != FORMAT_VERSION:
        raise BaselineError(f"{where} has format version {data[FORMAT]!r}; this loopcheck reads version "
                            f"{FORMAT_VERSION} (write it again with --write-baseline)")
    entries = data.get("findings")
    if not isinstance(entries, list):
        raise BaselineError(f"{where}: 'findings' must be a list")
    counts: Counter[Key] = Counter()
    for i, entry in enumerate(entries):
        if not (isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("code", "file", "fingerprint"))
                and isinstance(entry.get("count", 1), int) and entry.get("count", 1) > 0):
            raise BaselineError(f"{where}: entry {i} must have string code, file and fingerprint and a positive count")
        counts[(entry["code"], entry["file"], entry["fingerprint"])] += entry.get("count", 1)
    return counts


def filter_new(findings: Sequence[Finding], known: Counter[Key], base: Path) -> list[Finding]:
    """The findings that ``known`` (read from a baseline in directory ``base``) does not account
    for, in their order."""
    remaining = Counter(known)
    new = []
    for finding in findings:
        key = _key(finding, base)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(finding)
    return new


def _key(finding: Finding, base: Path) -> Key:
    return finding.code, _relative(finding.filename, base), finding.fingerprint


def _relative(filename: str, base: Path) -> str:
    path = Path(filename).absolute()
    try:
        return Path(os.path.relpath(path, base.absolute())).as_posix()
    except ValueError:  # another drive (Windows)
        return path.as_posix()
