"""An update every N iterations whose branch zeroes the gradients before its backward keeps nothing
of the iterations between updates: not an accumulation window (LC113), unless the zeroing is of
another optimizer or comes after the step."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC113" / "rl_update_period_zeroes_in_branch.py"

POLICY_BRANCH = """            self.policy_optimizer.zero_grad()
            policy_loss.backward()
            self.policy_optimizer.step()
"""


def _lines(source: str, code: str) -> list[int]:
    return [f.line for f in check_source(source, select=[code])]


def test_zeroing_first_in_the_update_branch_is_a_periodic_update() -> None:
    source = FIXTURE.read_text()
    assert POLICY_BRANCH in source
    assert _lines(source, "LC113") == []


def test_zeroing_after_the_step_leaves_a_window_whose_losses_are_thrown_away() -> None:
    source = FIXTURE.read_text()
    moved = source.replace(POLICY_BRANCH, """            policy_loss.backward()
            self.policy_optimizer.step()
            self.policy_optimizer.zero_grad()
""")
    backward = moved.splitlines().index("            policy_loss.backward()") + 1
    assert _lines(moved, "LC113") == [backward]


def test_zeroing_another_optimizer_does_not_clear_the_window() -> None:
    source = FIXTURE.read_text()
    other = source.replace(POLICY_BRANCH, """            self.qf_optimizer.zero_grad()
            policy_loss.backward()
            self.policy_optimizer.step()
""")
    backward = other.splitlines().index("            policy_loss.backward()") + 1
    assert _lines(other, "LC113") == [backward]
