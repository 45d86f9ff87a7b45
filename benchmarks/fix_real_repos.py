"""``--fix`` over real repositories: every safe fix, with the checks a reviewer starts from.

Reproduce (the command behind benchmarks/results/fix-real-repos.md):

    cd /work/corpus/broad && loopcheck check --diff --no-cache . > /tmp/broad.diff
    python benchmarks/fix_real_repos.py /work/corpus/broad --only-from-diff /tmp/broad.diff > fixes.md

(``--only-from-diff`` limits the work to the files a ``--diff`` run of the whole tree changed.)

For every Python file of the tree that holds a safe fix (default rules, as ``loopcheck check --fix``),
the fixes are applied in memory and the fixed file is checked: it must compile, and no rule (all of
them, selection ignored) may report more than before. The output lists each applied fix (file, line,
code, what the fix does) and its diff, for reading every path by hand, and the fixes that were not
applied, with why. The verdicts of that reading are kept in the results file.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter
from pathlib import Path

from loopcheck.discovery import discover
from loopcheck.engine import analyse, check_text, read_source, required_texts
from loopcheck.fixer import fix_text
from loopcheck.rules import RULES
from loopcheck.selection import resolve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--only-from-diff", type=Path, help="only the files this unified diff changes")
    args = parser.parse_args()
    codes, every = resolve(), frozenset(RULES)
    needles = required_texts(codes)
    applied: list[tuple[str, str, int, str]] = []
    left, broken, diffs = [], [], []
    if args.only_from_diff:
        names = [line[6:].strip() for line in args.only_from_diff.read_text().splitlines() if line.startswith("+++ b/")]
        files = [args.root / n for n in names]
    else:
        files = list(discover([args.root], args.root, [], False))
    for path in files:
        try:
            source = read_source(path)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        if not any(n in source for n in needles):
            continue
        name = path.relative_to(args.root).as_posix()
        _, results = analyse(source, name, codes)
        if not any(fix is not None and fix.safe for _, fix in results):
            continue
        result = fix_text(source, name, codes)
        left += result.not_applied
        if not result.applied:
            continue
        after = check_text(result.source, name, every)
        still = Counter((f.code, f.fingerprint) for f in after)
        for finding, fix in results:
            if fix is not None and fix.safe and still[(finding.code, finding.fingerprint)] == 0:
                applied.append((name, finding.code, finding.line, fix.message))
        try:
            compile(result.source, name, "exec", dont_inherit=True)
        except SyntaxError as error:
            broken.append(f"{name}: does not compile: {error}")
        new = Counter(f.code for f in after) - Counter(f.code for f in check_text(source, name, every))
        if new:
            broken.append(f"{name}: new findings {dict(new)}")
        diffs.append("".join(difflib.unified_diff(source.splitlines(True), result.source.splitlines(True),
                                                  f"a/{name}", f"b/{name}")))
    print(f"{len(files)} Python files under {args.root}; {len(applied)} safe fixes applied in {len(diffs)} files; "
          f"{len(left)} not applied; {len(broken)} files broken by the checks below\n")
    print("| file | line | code | fix |\n|---|---:|---|---|")
    for name, code, line, message in sorted(applied):
        print(f"| {name} | {line} | {code} | {message} |")
    print("\n## Not applied\n")
    for item in left:
        print(f"- {item.describe()}")
    print("\n## Checks failed\n")
    for line in broken:
        print(f"- {line}")
    print("\n## Diffs\n\n```diff")
    sys.stdout.write("".join(diffs))
    print("```")


if __name__ == "__main__":
    main()
