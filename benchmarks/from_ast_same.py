"""Check that the libcst nodes ``loopcheck.model.from_ast`` builds from ``ast`` are libcst's own,
in every field the model reads and in every expression's text, for every file of some corpora.

    python benchmarks/from_ast_same.py /work/corpus/broad /work/corpus/speed

Prints each difference (first 5 a file) and a summary: files compared, files whose tree
``from_ast`` does not build (``match``, ``except*``, type parameters), files libcst or Python cannot parse.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import libcst as cst

from loopcheck.engine import read_source
from loopcheck.model import from_ast


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args()
    same = differing = unsupported = unparsable = 0
    for root in args.roots:
        for path in sorted(root.rglob("*.py")):
            try:
                source = read_source(path)
                tree = ast.parse(source)
                parsed = cst.parse_module(source)
            except Exception:  # noqa: BLE001  (not Python, or not libcst's)
                unparsable += 1
                continue
            try:
                built = from_ast.module(tree, source)
            except from_ast.Unsupported:
                unsupported += 1
                continue
            found = list(from_ast.differences(built, parsed))
            from_ast.forget()
            if found:
                differing += 1
                print(f"{path}: {len(found)} differences")
                for line in found[:5]:
                    print(f"    {line}")
            else:
                same += 1
    print(f"same {same}, differing {differing}, not built {unsupported}, not parsed {unparsable}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
