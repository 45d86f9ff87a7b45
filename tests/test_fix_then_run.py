"""Every safe fix of a runnable script is verified by running the fixed script (see fix_then_run.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from .fix_then_run import FIXTURES, Case, Run, prepare, problems, run_all


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Case], dict[tuple[str, str], Run]]:
    work = tmp_path_factory.mktemp("fix-then-run")
    cases = prepare(work)
    return cases, run_all(cases, work)


def test_every_safe_fix_survives_running_the_fixed_script(harness) -> None:
    cases, runs = harness
    failures = {c.name: p for c in cases if (p := problems(c, runs))}
    assert not failures, "\n".join(f"{name}: {'; '.join(p)}\n{next(c.diff for c in cases if c.name == name)}"
                                   for name, p in failures.items())


def test_every_fixable_finding_was_fixed(harness) -> None:
    cases, _ = harness
    assert [(c.name, c.fixable, c.applied) for c in cases if c.applied != len(c.fixable)] == []
    # the scenarios and fixtures hold at least this many safe fixes: a drop means fixes went missing
    # (single-pass module-level loops no longer get LC105: no epoch follows their last window)
    assert sum(c.applied for c in cases) >= 30


def test_every_real_code_shape_has_a_fix(harness) -> None:
    cases, _ = harness
    fixed = {Path(c.original.path).stem for c in cases}
    assert {p.stem for p in FIXTURES.glob("*.py")} <= fixed


def test_fixed_scripts_lose_the_runtime_findings_they_had(harness) -> None:
    # the runtime checker agrees with the static fix: what it saw in the original is gone
    cases, runs = harness
    confirmed = [c.name for c in cases if runs[(c.name, "original")].codes & c.fixed_codes]
    assert len(confirmed) >= 10, confirmed
