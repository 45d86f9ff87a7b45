"""The autofix guarantees, over every invalid example of every fixable rule.

A fixed file parses, no longer reports what was fixed, is unchanged by a second ``--fix``, and
keeps every line the fix did not touch byte for byte and in order.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loopcheck.engine import analyse
from loopcheck.fixer import fix_text
from loopcheck.rules import RULES

FIXABLE = [(code, i, textwrap.dedent(example)) for code, rule in RULES.items() if rule.fixable
           for i, example in enumerate(rule.INVALID)]


def _untouched_lines_kept(before: str, after: str, touched: set[int]) -> bool:
    """Every line outside ``touched`` appears in ``after`` unchanged and in the same order."""
    remaining = iter(after.splitlines())
    return all(any(line == candidate for candidate in remaining)
               for n, line in enumerate(before.splitlines(), 1) if n not in touched)


@pytest.mark.parametrize(("code", "index", "example"), FIXABLE, ids=[f"{c}-{i}" for c, i, _ in FIXABLE])
def test_fix_guarantees(code: str, index: int, example: str) -> None:
    codes = frozenset({code})
    _, results = analyse(example, "example.py", codes)
    fixable = [f for f, fix in results if fix is not None]
    fixed, applied = fix_text(example, "example.py", codes, unsafe=True)
    assert applied == len(fixable)
    cst.parse_module(fixed)
    _, after = analyse(fixed, "example.py", codes)
    assert len(after) == len(results) - len(fixable)
    assert all(fix is None for _, fix in after)
    assert fix_text(fixed, "example.py", codes, unsafe=True) == (fixed, 0)
    touched = {n for f in fixable for n in range(f.line, f.end_line + 1)}
    assert _untouched_lines_kept(example, fixed, touched), fixed


def test_every_fixable_rule_fixes_at_least_one_example() -> None:
    for code, rule in RULES.items():
        if rule.fixable:
            assert any(fix for example in rule.INVALID
                       for _, fix in analyse(textwrap.dedent(example), "x.py", frozenset({code}))[1]), code


def test_zero_grad_moves_after_the_step_keeping_comments() -> None:
    source = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            # fresh gradients for this batch
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum  # mean over the window
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """)
    fixed, applied = fix_text(source, "t.py", frozenset({"LC101"}))
    assert applied == 1
    assert fixed == textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum  # mean over the window
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                # fresh gradients for this batch
                optimizer.zero_grad()
    """)


def test_partial_window_condition_is_extended() -> None:
    source = textwrap.dedent("""\
        for epoch in range(epochs):
            for step, batch in enumerate(tqdm(train_loader)):
                loss = model(**batch).loss / accum
                loss.backward()
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    fixed, _ = fix_text(source, "t.py", frozenset({"LC105"}))
    assert "        if (step + 1) % accum == 0 or (step + 1) == len(train_loader):\n" in fixed



def test_unscale_moves_before_the_clipping_of_the_step_branch() -> None:
    source = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            scaler.scale(criterion(model(x), y) / accum).backward()
            scaler.unscale_(optimizer)
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """)
    fixed, applied = fix_text(source, "t.py", frozenset({"LC204"}))
    assert applied == 1
    assert fixed.splitlines()[2:5] == ["    if (i + 1) % accum == 0:", "        scaler.unscale_(optimizer)",
                                       "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"]
    assert analyse(fixed, "t.py", frozenset({"LC201", "LC204"}))[1] == []


def test_identical_findings_are_all_fixed_in_one_run() -> None:
    loop = textwrap.dedent("""\
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """)
    fixed, applied = fix_text(loop + loop, "t.py", frozenset({"LC101"}))
    assert applied == 2
    assert fix_text(fixed, "t.py", frozenset({"LC101"})) == (fixed, 0)


def test_unsafe_fixes_need_the_flag() -> None:
    source = textwrap.dedent("""\
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(epochs):
            for x, y in train_loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            model.eval()
            evaluate(model, val_loader)
    """)
    codes = frozenset({"LC605"})
    [(finding, fix)] = analyse(source, "t.py", codes)[1]
    assert fix is not None and not fix.safe and not finding.fix_safe
    assert fix_text(source, "t.py", codes) == (source, 0)
    fixed, applied = fix_text(source, "t.py", codes, unsafe=True)
    assert applied == 1 and fixed.splitlines()[2] == "    model.train()"
