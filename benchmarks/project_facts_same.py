"""Check that a cheaper ``loopcheck.project.facts.extract`` gives the same facts as an older one.

The older ``facts.py`` is taken from a git revision of this repository; both extract the facts of
every ``.py`` file under the given directories. The same means: equal imports and DDP wraps (and
called names where the module wraps DDP), equal facts for every function both read, and a function
the new one skips has empty facts in the old one (no effect a loop can use, so a lookup that finds
nothing changes nothing). Each top-level function and class is also read alone (as a lookup of
one name reads it) and must equal the whole module's reading. Prints each difference, then a summary with both versions' CPU time;
exits 1 on any difference.

    python benchmarks/project_facts_same.py --rev c38f972 /work/corpus/speed /work/corpus/broad
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

from loopcheck.project import facts as new

ROOT = Path(__file__).resolve().parents[1]
_EMPTY = {"backward": None, "steps": (), "scaler_steps": (), "zeroes": False, "evals": (), "wraps_ddp": False, "controls_sync": False,
          "returns_graph": False}


def old_module(rev: str) -> ModuleType:
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:loopcheck/project/facts.py"], capture_output=True,
                          text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_facts.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_facts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def differences(old: object, found: new.ModuleFacts) -> list[str]:
    out = []
    pairs = [("", old.functions, found.functions)]  # type: ignore[attr-defined]
    pairs += [(f"{c}.", methods, found.classes.get(c, {})) for c, methods in old.classes.items()]  # type: ignore[attr-defined]
    for prefix, before, after in pairs:
        for name, facts in before.items():
            got = after.get(name)
            if got is None and any(getattr(facts, k) != v for k, v in _EMPTY.items()):
                out.append(f"{prefix}{name}: skipped, but has facts {facts}")
            elif got is not None and asdict(got) != asdict(facts):
                out.append(f"{prefix}{name}: {facts} -> {got}")
        out += [f"{prefix}{name}: read only by the new version" for name in set(after) - set(before)]
    if old.imports != found.imports:  # type: ignore[attr-defined]
        out.append("imports differ")
    if old.ddp_lines != found.ddp_lines or old.ddp_lines and old.called != found.called:  # type: ignore[attr-defined]
        out.append("DDP wraps differ")
    return out


def by_name(source: str, path: str, whole: new.ModuleFacts) -> list[str]:
    """Differences between reading the module a name at a time (a function, a class's method: what
    a lookup reads) and all at once: from the whole module's tree, and from the blocks of text that
    define the name (a function without effect may then be left out)."""
    reader = new.ModuleReader(source, path)
    outline = reader.outline()
    blocks = new.ModuleReader(source, path)  # never parsed whole unless its text cannot be cut
    nothing = new.ModuleFacts(path, complete=False, outlined=False)
    out = []
    for name in sorted(whole.functions):
        one = reader.read(outline, [name])
        if one.functions != {name: whole.functions[name]} or any(one.classes.values()):
            out.append(f"{name}: read alone {one.functions}")
        one = blocks.read(nothing, [name])
        if _effective(one.functions) != _effective({name: whole.functions[name]}) or any(one.classes.values()):
            out.append(f"{name}: read from its block {one.functions}")
    for cls, methods in sorted(whole.classes.items()):
        for name in sorted(methods):
            one = reader.read(outline, [f"{cls}.{name}"])
            if one.classes.get(cls) != {name: methods[name]} or one.functions:
                out.append(f"{cls}.{name}: read alone {one.classes.get(cls)}")
            one = blocks.read(nothing, [f"{cls}.{name}"])
            if _effective(one.classes.get(cls, {})) != _effective({name: methods[name]}) or one.functions:
                out.append(f"{cls}.{name}: read from its block {one.classes.get(cls)}")
    for name in sorted({n for methods in whole.classes.values() for n in methods}):
        one = blocks.read(nothing, [f"*.{name}"])  # the method of every class
        expected = {c: m for c, ms in whole.classes.items() if (m := _effective({k: v for k, v in ms.items() if k == name}))}
        if {c: m for c, ms in one.classes.items() if (m := _effective(ms))} != expected or one.functions:
            out.append(f"*.{name}: read from blocks {one.classes}")
    _counts["cut" if not blocks._parsed else "whole"] += 1
    return out


_counts = {"cut": 0, "whole": 0}


def _effective(functions: dict[str, new.FunctionFacts]) -> dict[str, new.FunctionFacts]:
    return {name: f for name, f in functions.items() if any(getattr(f, k) != v for k, v in _EMPTY.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", required=True, help="git revision of the older facts.py")
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    old = old_module(args.rev)
    warnings.simplefilter("ignore")  # ast.parse warns about invalid escapes in the corpus
    files = functions_old = functions_new = different = 0
    cpu_old = cpu_new = 0.0
    for root in args.paths:
        for path in sorted(root.rglob("*.py")):
            if not path.is_file():
                continue
            source = path.read_text(encoding="utf-8", errors="replace")
            start = time.process_time()
            before = old.extract(source, str(path))
            middle = time.process_time()
            after = new.extract(source, str(path))
            cpu_old, cpu_new = cpu_old + middle - start, cpu_new + time.process_time() - middle
            files += 1
            functions_old += len(before.functions) + sum(len(m) for m in before.classes.values())
            functions_new += len(after.functions) + sum(len(m) for m in after.classes.values())
            for line in differences(before, after) + by_name(source, str(path), after):
                different += 1
                print(f"{path}: {line}")
    print(f"{files} files: {different} differences; functions read {functions_old} -> {functions_new}; "
          f"extract CPU {cpu_old:.1f} s -> {cpu_new:.1f} s; read block by block: {_counts['cut']} files, "
          f"whole after a doubt: {_counts['whole']}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
