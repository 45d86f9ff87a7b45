"""Check that ``loopcheck.positions.locate`` gives every flagged node the position libcst's own
``PositionProvider`` gives it over the whole module.

Every file of the corpus that loopcheck would check is checked in this process (no cache, default
rules); at each ``locate`` call, each requested node's range is compared with the range from a
``PositionProvider`` pass over the whole module. ``--files-of REPORT`` (a ``--output-format json``
report) checks only the files that have findings there: the others never ask for positions.
Prints each difference and a summary; exits 1 on any difference.

    python benchmarks/positions_same.py /work/corpus/broad [--files-of report.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from libcst.metadata import MetadataWrapper, PositionProvider

import loopcheck.positions as positions
from loopcheck import checker
from loopcheck.config import Config
from loopcheck.discovery import discover
from loopcheck.engine import text_tests
from loopcheck.selection import resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--files-of", type=Path, help="a JSON report: check only the files it has findings in")
    args = parser.parse_args(argv)
    wanted = {f["filename"] for f in json.loads(args.files_of.read_text())} if args.files_of else None
    os.chdir(args.target)
    codes = resolve()
    config = Config(root=Path.cwd())
    files = discover([Path(".")], config.root, [], True).files
    if wanted is not None:
        files = [f for f in files if checker._display(f) in wanted]
    _, todo, _ = checker._read(files, codes, config, None, text_tests(codes), None)
    real = positions.locate
    compared = different = 0

    def checked(module, source, nodes, tree=None):  # type: ignore[no-untyped-def]
        nonlocal compared, different
        found = real(module, source, nodes, tree)
        reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node in nodes:
            compared += 1
            if found.get(node) != reference.get(node):
                different += 1
                print(f"{current}: {type(node).__name__} at {reference.get(node)} located at {found.get(node)}")
        return found

    positions.locate = checked
    current = ""
    findings = 0
    for job in todo:
        current = job[1]
        findings += len(checker._check_job(job)[0])
    print(f"{len(todo)} files checked, {findings} findings: {compared} located nodes compared, {different} differ")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
