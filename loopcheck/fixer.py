"""``--fix`` and ``--diff``: apply the rules' fixes to a file's text, and to files on disk."""

from __future__ import annotations

from pathlib import Path

from loopcheck.checker import _display, _ignored, _per_file_ignores
from loopcheck.config import Config, Options
from loopcheck.engine import analyse, read_source_and_encoding, required_texts

_MAX_FIX_ROUNDS = 25  # each round applies one fix; a file rarely has more than a few


def fix_text(source: str, filename: str, codes: frozenset[str], unsafe: bool = False,
             options: Options = Options()) -> tuple[str, int]:
    """``source`` with every applicable fix applied (one at a time, re-checking in between) and the
    number of fixes applied."""
    from collections import Counter

    from loopcheck.fixes import apply

    applied = 0
    # A fix that does not make its finding go away is not applied again: each finding (by code and
    # fingerprint) gets as many attempts as there were such findings to begin with.
    attempts: Counter[tuple[str, str]] = Counter()
    allowed: Counter[tuple[str, str]] | None = None
    for _ in range(_MAX_FIX_ROUNDS):
        module, results = analyse(source, filename, codes, options)
        fixable = [(f, fix) for f, fix in results if fix is not None and (fix.safe or unsafe)]
        if allowed is None:
            allowed = Counter((f.code, f.fingerprint) for f, _ in fixable)
        todo = [(f, fix) for f, fix in fixable if attempts[(f.code, f.fingerprint)] < allowed[(f.code, f.fingerprint)]]
        if module is None or not todo:
            break
        finding, fix = todo[0]
        attempts[(finding.code, finding.fingerprint)] += 1
        fixed = apply(module, fix).code
        if fixed == source:
            break
        source, applied = fixed, applied + 1
    return source, applied


def fix_files(files: list[Path], codes: frozenset[str], config: Config, write: bool,
              unsafe: bool) -> tuple[int, list[str]]:
    """Apply fixes file by file: write them back (``write``) and/or return unified diffs."""
    import difflib

    per_file = _per_file_ignores(config)
    needles = required_texts(codes)
    total, diffs = 0, []
    for file in files:
        try:
            source, encoding = read_source_and_encoding(file)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue  # reported by the check that follows
        if not any(n in source for n in needles):
            continue
        name = _display(file)
        fixed, applied = fix_text(source, name, codes - _ignored(file, config.root, per_file), unsafe,
                                  config.options)
        if not applied:
            continue
        total += applied
        diffs.append("".join(difflib.unified_diff(source.splitlines(True), fixed.splitlines(True),
                                                  f"a/{name}", f"b/{name}")))
        if write:
            file.write_bytes(fixed.encode(encoding))
    return total, diffs
