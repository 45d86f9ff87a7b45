"""Static recall on real training loops with one pitfall injected.

    python -m benchmarks.mutation.run --ops benchmarks.mutation.ops_accumulation \
        --corpus /work/corpus/broad --json /tmp/mut.json --details /tmp/mut.md

The labelled real-world benchmark (``benchmarks/realworld``) holds a few hundred loops; the loop
model meets many more constructs in real code than those. Here every training file of a corpus of
real repositories (not committed: see ``benchmarks/results/broad-corpus-manifest.txt``) is checked
as it is, then once per mutant: the same file with one pitfall injected by an operator (delete a
``no_sync``, move a scheduler step into the batch loop, ...), in place, with the rest of its
repository around it (project facts are read from the real files, the mutated text is the file's
own). A mutant is *found* when its check reports the operator's code on a line where the check of
the unchanged file did not. Edits keep the line count, so rows compare directly.

With ``--rename`` both files are checked with the local names of the function (or module level)
holding the mutant's line renamed to ``v0``, ``v1``, ... (``renamed.py``; the same names in both;
mutants whose scope cannot be renamed are left out): a mutant found plainly but not renamed is found
through what its code happens to name things.

An operator is a callable ``(source, tree) -> Iterable[Mutant]`` in a module's ``OPERATORS`` list; it
injects only where its pitfall really happens (its precondition is its docstring), so a mutant that
is not found is a miss of the loop model on real surroundings, to be read in ``--details``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

IGNORED_CODES = {"LC206"}  # a deprecated API name, not a loop pitfall (as in the realworld score)


@dataclass(frozen=True)
class Mutant:
    code: str  # the rule that should report it
    line: int  # the injected pitfall's line
    what: str  # one line: the edit
    source: str  # the whole mutated file (same line count)


@dataclass(frozen=True)
class Result:
    operator: str
    code: str
    repo: str
    file: str
    line: int
    what: str
    found: bool
    other_codes: tuple[str, ...]  # new findings of other codes (the pitfall seen as something else)


Operator = Callable[[str, ast.Module], Iterable[Mutant]]


def operators(modules: list[str]) -> list[tuple[str, Operator]]:
    found = []
    for name in modules:
        module = importlib.import_module(name)
        found += [(f"{name.rsplit('.', 1)[-1]}.{op.__name__}", op) for op in module.OPERATORS]
    return found


def training_files(corpora: list[Path]) -> list[tuple[str, Path]]:
    """(repository, file) for every ``.py`` file of the corpora that calls ``.backward(`` and steps."""
    found = []
    for corpus in corpora:
        for root, dirs, files in os.walk(corpus):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = Path(root, name)
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if ".backward(" in text and ".step(" in text:
                    found.append((f"{corpus.name}/{path.relative_to(corpus).parts[0]}", path))
    return found


def findings(source: str, path: Path, codes: frozenset[str]) -> Counter[tuple[str, int]]:
    """(code, line) of each finding of ``source`` checked as the file at ``path`` in its project."""
    from loopcheck.engine import LazyProject, check_text

    return Counter((f.code, f.line) for f in check_text(source, str(path), codes, project=LazyProject(str(path)))
                   if f.code not in IGNORED_CODES)


_OPS: list[tuple[str, Operator]] = []
_CODES: frozenset[str] = frozenset()
_RENAME = False


def _init(modules: list[str], rename: bool = False) -> None:
    global _OPS, _CODES, _RENAME
    from loopcheck.selection import resolve

    _OPS, _CODES, _RENAME = operators(modules), resolve(), rename


def _mutants(path: Path) -> tuple[str, ast.Module, list[tuple[str, Mutant]]] | None:
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None
    mutants = []
    for name, op in _OPS:
        for mutant in op(source, tree):
            if mutant.source.count("\n") != source.count("\n"):
                raise AssertionError(f"{name} changed the line count of {path}")
            try:
                compile(mutant.source, str(path), "exec")
            except SyntaxError:
                continue
            mutants.append((name, mutant))
    return source, tree, mutants


def propose(job: tuple[str, Path]) -> list[tuple[str, Path, str, int]]:
    """(repository, file, operator, line) of every mutant of one file."""
    repo, path = job
    made = _mutants(path)
    return [(repo, path, name, m.line) for name, m in made[2]] if made else []


def check_file(job: tuple[str, Path, frozenset[tuple[str, int]]]) -> list[Result]:
    """Check one file as it is and once per chosen mutant (operator, line)."""
    repo, path, chosen = job
    made = _mutants(path)
    if made is None:
        return []
    source, tree, mutants = made
    checked: dict[str, Counter[tuple[str, int]]] = {}  # the unchanged file's findings, by its text
    results = []
    for name, mutant in mutants:
        if (name, mutant.line) not in chosen:
            continue
        original, mutated = source, mutant.source
        if _RENAME:
            from benchmarks.mutation.renamed import renamed_pair

            pair = renamed_pair(source, tree, mutant.source, mutant.line)
            if pair is None:
                continue
            original, mutated = pair
        if original not in checked:
            checked[original] = findings(original, path, _CODES)
        new = findings(mutated, path, _CODES) - checked[original]
        codes = {code for code, _ in new}
        results.append(Result(name, mutant.code, repo, str(path), mutant.line, mutant.what,
                              mutant.code in codes, tuple(sorted(codes - {mutant.code}))))
    return results


def choose(proposed: list[tuple[str, Path, str, int]], per_file: int, per_repo: int) -> dict[Path, set[tuple[str, int]]]:
    """At most ``per_file`` mutants of each operator in a file and ``per_repo`` in a repository (big
    repositories repeat one script many times), in file order."""
    chosen: dict[Path, set[tuple[str, int]]] = defaultdict(set)
    in_file: Counter[tuple[str, Path]] = Counter()
    in_repo: Counter[tuple[str, str]] = Counter()
    for repo, path, name, line in proposed:
        if in_file[name, path] < per_file and in_repo[name, repo] < per_repo:
            in_file[name, path] += 1
            in_repo[name, repo] += 1
            chosen[path].add((name, line))
    return chosen


def summary(results: list[Result]) -> str:
    by_op: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_op[r.operator].append(r)
    rows = ["| operator | code | mutants | repositories | found | recall | seen as another code |",
            "|---|---|---|---|---|---|---|"]
    for name, rs in sorted(by_op.items()):
        found = sum(r.found for r in rs)
        other = sum(1 for r in rs if not r.found and r.other_codes)
        rows.append(f"| {name} | {rs[0].code} | {len(rs)} | {len({r.repo for r in rs})} | {found} | "
                    f"{found / len(rs):.2f} | {other} |")
    total = len(results)
    found = sum(r.found for r in results)
    rows.append(f"| all | | {total} | {len({r.repo for r in results})} | {found} | "
                f"{found / total if total else 0:.2f} | |")
    return "\n".join(rows)


def details(results: list[Result]) -> str:
    out = ["# Mutants not found", ""]
    for r in sorted(results, key=lambda r: (r.operator, r.file, r.line)):
        if not r.found:
            other = f" (reported instead: {', '.join(r.other_codes)})" if r.other_codes else ""
            out.append(f"- {r.operator} {r.code} {r.file}:{r.line} {r.what}{other}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", action="append", required=True, help="module with OPERATORS (repeatable)")
    parser.add_argument("--corpus", action="append", type=Path, required=True, help="folder of repositories (repeatable)")
    parser.add_argument("--per-file", type=int, default=2, help="mutants of one operator per file (default 2)")
    parser.add_argument("--per-repo", type=int, default=4, help="mutants of one operator per repository (default 4)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--details", type=Path)
    parser.add_argument("--rename", action="store_true",
                        help="check each mutant and its unchanged file with the local names of its scope renamed")
    args = parser.parse_args(argv)
    files = training_files([c.resolve() for c in args.corpus])
    print(f"{len(files)} training files", file=sys.stderr)
    with get_context("fork").Pool(args.jobs, _init, (args.ops, args.rename)) as pool:
        proposed = [m for ms in pool.imap(propose, files, chunksize=8) for m in ms]
        chosen = choose(proposed, args.per_file, args.per_repo)
        print(f"{len(proposed)} mutants proposed, {sum(map(len, chosen.values()))} checked", file=sys.stderr)
        repos = dict((path, repo) for repo, path in files)
        jobs = [(repos[path], path, frozenset(c)) for path, c in chosen.items()]
        results = [r for rs in pool.imap_unordered(check_file, jobs) for r in rs]
    results.sort(key=lambda r: (r.operator, r.file, r.line))
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    if args.details:
        args.details.write_text(details(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
