"""The long fuzzing run of ``--fix``: mutated training loops, counted.

Reproduce (the command behind benchmarks/results/fix-fuzz.md):

    python benchmarks/fix_fuzz.py --programs 3000 --seed 0

Each program is a seed loop (rule examples, runtime scenarios, fix-then-run fixtures) mutated 1-4
times at the statement level (tests/fuzz_loops.py); programs that do not compile are skipped. Every
rule runs and every fix is applied, unsafe ones included, then the promises are checked: the fixed
code compiles, no finding appears that the program did not have, and a second ``--fix`` changes
nothing. Prints a markdown summary and the first failures (seed, mutated program, what broke).
With ``PYTHONPATH`` pointing at an older checkout it measures that version's driver.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: an older checkout may be measured

from tests.fuzz_loops import compiles, mutate, seeds, verify  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=3, help="failures to print in full")
    args = parser.parse_args()
    import loopcheck

    pool = seeds()
    rng = random.Random(args.seed)
    stats: Counter[str] = Counter()
    failures = []
    start = time.perf_counter()
    for n in range(args.programs):
        which, seed, steps = rng.randrange(len(pool)), rng.randrange(2**32), rng.randint(1, 4)
        source = mutate(pool[which], random.Random(seed), steps)
        if not compiles(source):
            stats["not compiling (skipped)"] += 1
            continue
        stats["programs"] += 1
        try:
            applied, broken = verify(source)
        except Exception as error:  # noqa: BLE001 - an exception is a finding of the fuzzer
            applied, broken = 0, [f"exception: {type(error).__name__}: {error}"]
        stats["fixes applied"] += applied
        stats["programs with a fix"] += bool(applied)
        for problem in broken:
            stats[problem.split(":")[0]] += 1
        if broken:
            stats["programs with a broken promise"] += 1
            failures.append((n, which, seed, steps, broken, source))
    elapsed = time.perf_counter() - start
    print(f"loopcheck from {Path(loopcheck.__file__).parent}; {args.programs} mutated programs, seed {args.seed}, "
          f"{elapsed:.0f} s\n")
    print("| count | what |\n|---:|---|")
    for what, count in sorted(stats.items(), key=lambda kv: -kv[1]):
        print(f"| {count} | {what} |")
    for n, which, seed, steps, broken, source in failures[:args.show]:
        print(f"\n### program {n} (seed loop {which}, mutation seed {seed}, {steps} steps): {'; '.join(broken)}\n")
        print("```python\n" + source + "```")


if __name__ == "__main__":
    main()
