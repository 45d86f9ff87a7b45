"""Fuzzing check and fix, bounded in time (the longer run is benchmarks/fix_fuzz.py).

Random valid programs (hypothesmith) and mutated training loops go through check and fix: nothing
raises, the fixed code compiles, a second ``--fix`` changes nothing (unsafe fixes included) and no
finding appears that the unfixed code did not have.
"""
from __future__ import annotations

import random

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcheck.engine import check_text
from loopcheck.fixer import fix_text
from loopcheck.rules import RULES

from .fuzz_loops import compiles, mutate, seeds, verify
from .programs import PROGRAMS

EVERY = frozenset(RULES)
SEEDS = seeds()
LOOP = "\nfor i, (x, y) in enumerate(loader):\n    loss = criterion(model(x), y)\n    loss.backward()\n" \
       "    if (i + 1) % accum == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n"


def bounded(examples: int) -> settings:
    """Derandomized (the same programs on every run, so CI is stable) and without a deadline."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


@bounded(40)
@given(PROGRAMS)
def test_random_programs_beside_a_training_loop(program: str) -> None:
    source = program + "\n" + LOOP  # the loop makes every rule parse and model the random code too
    if not compiles(source):
        return
    check_text(source, "fuzz.py", EVERY)
    result = fix_text(source, "fuzz.py", EVERY, unsafe=True)
    assert compiles(result.source)


@bounded(25)
@given(hypothesmith.from_node(cst.Module))
def test_random_modules_inside_a_training_loop(program: str) -> None:
    body = "".join(f"    {line}\n" for line in program.splitlines())
    source = f"for i, (x, y) in enumerate(loader):\n{body}    loss.backward()\n    optimizer.step()\n"
    if not compiles(source):
        return
    result = fix_text(source, "fuzz.py", EVERY, unsafe=True)
    assert compiles(result.source)


@bounded(250)
@given(st.integers(0, len(SEEDS) - 1), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_mutated_training_loops_keep_the_fix_promises(which: int, seed: int, steps: int) -> None:
    source = mutate(SEEDS[which], random.Random(seed), steps)
    if not compiles(source):
        return
    _, broken = verify(source)
    assert not broken, f"{broken}\n--- mutated seed {which} with {seed}/{steps}:\n{source}"
