"""Real training through HF Transformers' Trainer, Accelerate (1 and 2 processes), Lightning and
timm's training pieces, under ``loopcheck run``: the correct runs give no finding and the right
counters, each injected pitfall is found at its line, and the script's own output and exit code
are kept. Versions are pinned in pyproject's ``frameworks`` extra (part of ``test``); a framework
that is not installed is skipped, naming the missing module."""
from __future__ import annotations

import pytest

from .conftest import missing_modules
from .scenarios import all_scenarios, counter_problems, findings_of

SCENARIOS = all_scenarios()
OK = [s for s in SCENARIOS if s.name.endswith("_ok")]
DISTRIBUTED = [s for s in SCENARIOS if s.distributed]
PENDING = [(s, item) for s in SCENARIOS for item in s.pending]


def _outcome(runs, scenario, kind="run"):
    missing = missing_modules(scenario)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[test]' installs the pinned versions)")
    return runs[(scenario.name, "watch" if scenario.watch and kind == "run" else kind)]


def _without(found: set, codes: set[str]) -> set:
    return {f for f in found if f[1] not in codes}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_findings_at_the_marked_lines(scenario, framework_runs) -> None:
    run = _outcome(framework_runs, scenario)
    assert run.exit_code == 0 and run.report, f"exit {run.exit_code}; stderr:\n{run.stderr[-4000:]}"
    assert run.report["disabled_checks"] == []
    pending = scenario.pending_codes
    assert _without(findings_of(run.report), pending) == _without(set(scenario.expected), pending), \
        run.stderr[-4000:]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_counters(scenario, framework_runs) -> None:
    run = _outcome(framework_runs, scenario)
    assert counter_problems(run.report, scenario.counters) == []


@pytest.mark.parametrize("scenario", DISTRIBUTED, ids=lambda s: s.name)
def test_two_processes(scenario, framework_runs) -> None:
    run = _outcome(framework_runs, scenario, "2proc")
    assert run.exit_code == 0 and run.report, f"exit {run.exit_code}; output:\n{run.stderr[-4000:]}"
    assert run.report["distributed"]["merged"] and run.report["distributed"]["missing_ranks"] == []
    assert run.report["distributed"]["steps_agree"]
    pending = scenario.pending_codes
    assert _without(findings_of(run.report), pending) == _without(set(scenario.expected), pending)
    assert counter_problems(run.report, scenario.distributed) == []


@pytest.mark.parametrize("scenario", OK, ids=lambda s: s.name)
def test_script_output_and_exit_code_are_kept(scenario, framework_runs) -> None:
    checked = _outcome(framework_runs, scenario)
    plain = _outcome(framework_runs, scenario, "python")
    assert plain.exit_code == checked.exit_code == 0, plain.stderr[-4000:]
    # the script's last line is the training result: identical means the checker changed nothing
    # (HF's Trainer also prints its run time, which varies)
    plain_lines, checked_lines = plain.stdout.splitlines(), checked.stdout.splitlines()
    assert plain_lines and checked_lines[-1] == plain_lines[-1]
    assert len(checked_lines) == len(plain_lines)
    assert "loopcheck" not in checked.stdout and "internal error" not in checked.stderr
    assert "loopcheck: " in checked.stderr  # the summary goes to stderr


@pytest.mark.parametrize("scenario,item", PENDING, ids=[f"{s.name}-{i.replace(' ', '_')}" for s, i in PENDING])
def test_pending(scenario, item, framework_runs) -> None:
    """What waits on runtime work in progress: fails (strict xfail) once it works, so that the
    scenario's ``pending:`` line is removed and the item joins the checks above."""
    run = _outcome(framework_runs, scenario)
    if item.startswith("LC"):
        ok = item in {code for _, code, _ in run.report.get("findings") and findings_of(run.report) or set()} and \
            findings_of(run.report) == set(scenario.expected)
    else:
        ok = counter_problems(run.report, (item,)) == []
    if not ok:
        pytest.xfail(f"pending: {item}")
    pytest.fail(f"{item} now works: remove it from the `pending:` line of {scenario.path.name}")
