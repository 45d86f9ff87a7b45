"""Mutated training loops for fuzzing check and fix (tests/test_fuzz.py, benchmarks/fix_fuzz.py).

A seed loop (every rule example, runtime scenario and fix-then-run fixture) is parsed with libcst
and changed a few times at the statement level: a statement deleted, duplicated, swapped with the
next one, wrapped in a condition (the step test, its negation, ``scaler is not None``), given an
``else:``, or a training call inserted (zeroing, step, clip, unscale, update, scheduler, EMA, a
``continue`` guard, logging ``loss.item()``, eval/train mode). ``verify`` then checks the promises
of ``--fix``, unsafe fixes included.
"""
from __future__ import annotations

import random
import textwrap
from collections import Counter
from pathlib import Path

import libcst as cst

ROOT = Path(__file__).resolve().parents[1]

CONDITIONS = ["(i + 1) % accum == 0", "(i + 1) % accum != 0", "(i + 1) % accum", "scaler is not None",
              "use_amp", "i % accum == 0", "not (i + 1) % accum == 0", "(i + 1) == len(loader)"]
CALLS = ["optimizer.zero_grad()", "model.zero_grad()", "optimizer.step()", "scaler.step(optimizer)",
         "scaler.update()", "scaler.unscale_(optimizer)", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
         "scheduler.step()", "ema.update(model)", "loss.backward()", "(loss / accum).backward()",
         "scaler.scale(loss).backward()", "total += loss.item()", "loss = loss / accum", "model.eval()",
         "model.train()", "if (i + 1) % accum != 0:\n    continue\n", "losses.append(loss)",
         "with model.no_sync():\n    loss.backward()\n"]


def seeds() -> list[str]:
    from loopcheck.rules import RULES

    out = [textwrap.dedent(e) for rule in RULES.values() for e in (*rule.INVALID, *rule.VALID)]
    for folder in ("runtime", "tests/fixtures/fix_then_run"):
        out += [p.read_text() for p in sorted((ROOT / folder).glob("*.py"))]
    return out


class _Blocks(cst.CSTVisitor):
    def __init__(self) -> None:
        self.blocks: list[cst.IndentedBlock] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)


class _Replace(cst.CSTTransformer):
    def __init__(self, block: cst.IndentedBlock, body: list[cst.BaseStatement]) -> None:
        super().__init__()
        self.block, self.body = block, body

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self.body) if original is self.block else updated


def mutate(source: str, rng: random.Random, steps: int = 3) -> str:
    """``source`` changed ``steps`` times; unchanged where it has no block to change."""
    module = cst.parse_module(source)
    for _ in range(steps):
        finder = _Blocks()
        module.visit(finder)
        if not finder.blocks:
            return module.code
        block = rng.choice(finder.blocks)
        body = list(block.body)
        at = rng.randrange(len(body))
        kind = rng.choice(["delete", "duplicate", "swap", "wrap", "else", "insert", "insert", "insert"])
        if kind == "delete" and len(body) > 1:
            del body[at]
        elif kind == "duplicate":
            body.insert(at, body[at])
        elif kind == "swap" and at + 1 < len(body):
            body[at], body[at + 1] = body[at + 1], body[at]
        elif kind == "wrap":
            wrapped = cst.If(cst.parse_expression(rng.choice(CONDITIONS)), cst.IndentedBlock([body[at]]))
            body[at] = wrapped
        elif kind == "else" and isinstance(body[at], cst.If) and body[at].orelse is None:
            call = cst.parse_statement(rng.choice(CALLS))
            body[at] = body[at].with_changes(orelse=cst.Else(cst.IndentedBlock([call])))
        else:
            body.insert(at, cst.parse_statement(rng.choice(CALLS)))
        module = module.visit(_Replace(block, body))
    return module.code


def compiles(source: str) -> bool:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `1()` compiles with a SyntaxWarning
        try:
            compile(source, "fuzz.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def verify(source: str) -> tuple[int, list[str]]:
    """Fix ``source`` with every rule, unsafe fixes included; (fixes applied, broken promises)."""
    from loopcheck.engine import check_text
    from loopcheck.fixer import fix_text
    from loopcheck.rules import RULES

    every = frozenset(RULES)
    before = Counter(f.code for f in check_text(source, "fuzz.py", every))
    fixed, applied = _fix(fix_text(source, "fuzz.py", every, unsafe=True))
    broken = []
    if not compiles(fixed):
        broken.append("the fixed code does not compile")
        return applied, broken
    after = Counter(f.code for f in check_text(fixed, "fuzz.py", every))
    new = after - before
    if new:
        broken.append(f"new findings after the fix: {dict(new)}")
    again, more = _fix(fix_text(fixed, "fuzz.py", every, unsafe=True))
    if more or again != fixed:
        broken.append(f"not idempotent: a second --fix applied {more} more")
    return applied, broken


def _fix(result: object) -> tuple[str, int]:
    """(source, fixes applied) of ``fix_text``'s result (a pair before the driver reported more)."""
    if isinstance(result, tuple):
        return result  # type: ignore[return-value]
    return result.source, result.applied  # type: ignore[attr-defined]
