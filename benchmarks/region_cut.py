"""Measure a region cut: check a corpus twice in one process, first as is, then with the bodies of
top-level functions and class methods that no kept code can reach blanked (``pass`` and empty
lines, so every kept line keeps its number), and compare the findings and the CPU of each stage.

A def is kept when its text holds a loop or a back-propagating call (the screen's trigger
pattern), or when its name is mentioned (whole word) outside its own body in code that is kept,
transitively. This is the cheapest reachability test; it does NOT keep the file-wide facts the
model reads from every assignment and call (benchmarks/results/static-speed-parse-s5.md), so a
changed finding here is what such a cut would get wrong.

    python benchmarks/region_cut.py /work/corpus/broad
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import time
from collections import Counter
from pathlib import Path

from loopcheck import checker, engine
from loopcheck import model as model_package
from loopcheck.config import Config
from loopcheck.discovery import discover
from loopcheck.engine import text_tests
from loopcheck.screen import _TRIGGER, Verdict, screen
from loopcheck.selection import resolve

KEEP_STORED = os.environ.get("REGION_KEEP_STORED") == "1"  # also keep a def assigning a name kept code mentions
CONTROL = os.environ.get("REGION_CONTROL") == "1"
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _candidates(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found = []
    for statement in tree.body:
        if isinstance(statement, _DEFS):
            found.append(statement)
        elif isinstance(statement, ast.ClassDef):
            found += [s for s in statement.body if isinstance(s, _DEFS)]
    return [d for d in found if _start(d.body[0]) > d.lineno]


def _start(statement: ast.stmt) -> int:
    """The first line of ``statement``, its decorators included."""
    return min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])


def _stored(definition: ast.AST) -> set[str]:
    """Last name parts ``definition`` assigns (``x =``, ``self.x +=``, ``for x in``, ``as x``)."""
    found = set()
    for node in ast.walk(definition):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            found.add(node.id if isinstance(node, ast.Name) else node.attr)
    return found


def blank(source: str) -> str:
    """``source`` with the unreachable defs' bodies blanked (the same text where nothing is cut)."""
    if "\r" in source or re.search(r"^ *\t", source, re.M):
        return source
    screened = screen(source)
    if CONTROL:  # the same work, nothing cut: what the second pass gains from warm caches alone
        return source
    if screened.verdict is not Verdict.TRAINING_LOOP or screened.tree is None:
        return source  # other files are checked only by rules reading every statement (LC206)
    tree = screened.tree
    lines = source.split("\n")
    defs = _candidates(tree)
    if not defs:
        return source
    body = {id(d): "\n".join(lines[_start(d.body[0]) - 1:d.end_lineno]) for d in defs}
    kept = {id(d) for d in defs if any(isinstance(n, _LOOPS) for n in ast.walk(d)) or _TRIGGER.search(body[id(d)])}
    # text outside every candidate's body
    outside = lines[:]
    for d in defs:
        outside[_start(d.body[0]) - 1:d.end_lineno] = [""] * (d.end_lineno - _start(d.body[0]) + 1)  # type: ignore[operator]
    reached = "\n".join(outside) + "\n" + "\n".join(body[i] for i in kept)
    stored = {id(d): _stored(d) for d in defs}
    changed = True
    while changed:
        changed = False
        words = set(re.findall(r"\w+", reached)) if KEEP_STORED else set()
        for d in defs:
            if id(d) not in kept and (re.search(rf"(?<!def )\b{re.escape(d.name)}\b", reached)
                                      or stored[id(d)] & words):
                kept.add(id(d))
                reached += "\n" + body[id(d)]
                changed = True
    for d in defs:
        if id(d) in kept:
            continue
        first = d.body[0]
        indent = " " * first.col_offset
        if lines[_start(first) - 1][:first.col_offset].strip():
            continue
        lines[_start(first) - 1:d.end_lineno] = [indent + "pass"] + [""] * (d.end_lineno - _start(first))  # type: ignore[operator]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    os.chdir(args.target)
    codes = resolve()
    config = Config(root=Path.cwd())
    files = discover([Path(".")], config.root, [], True).files
    importlib.import_module("loopcheck.positions")
    importlib.import_module("loopcheck.model")
    _, todo, _ = checker._read(files, codes, config, None, text_tests(codes), None)
    spent: Counter[str] = Counter()
    mode = {"cut": False}

    def timed(name, function):  # type: ignore[no-untyped-def]
        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            start = time.process_time()
            try:
                return function(*a, **k)
            finally:
                spent[f"{'cut' if mode['cut'] else 'whole'} {name}"] += time.process_time() - start
        return wrapper

    original = engine.analyse
    cutter = timed("blank (extra ast.parse)", blank)

    def analyse(source, *a, **k):  # type: ignore[no-untyped-def]
        if mode["cut"]:
            text = cutter(source)
            if text != source:
                spent["files cut"] += 1
                spent["chars before"] += len(source)
                spent["chars after"] += len(text)
            source = text
        return original(source, *a, **k)

    engine.analyse = analyse
    engine.parse_module = timed("libcst parse", engine.parse_module)
    engine.screen = timed("screen", engine.screen)
    model_package.build = timed("model build", model_package.build)
    results = {}
    for cut in (False, True):
        mode["cut"] = cut
        start = time.process_time()
        results[cut] = {(f.filename, f.line, f.col, f.code, f.message) for job in todo
                        for f in checker._check_job(job)[0]}
        spent[f"{'cut' if cut else 'whole'} check"] += time.process_time() - start
    for key in sorted(spent):
        print(f"{key}\t{spent[key]:.2f}" if isinstance(spent[key], float) else f"{key}\t{spent[key]}")
    print(f"findings whole {len(results[False])} cut {len(results[True])}")
    for finding in sorted(results[False] - results[True]):
        print("lost", *finding)
    for finding in sorted(results[True] - results[False]):
        print("new ", *finding)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
