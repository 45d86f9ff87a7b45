"""Every scenario script in ``runtime/`` under ``loopcheck run`` on the CPU: exactly the
findings its ``# expect:`` markers name (none for the correct ``ok_*`` loops)."""
from __future__ import annotations

import pytest

from loopcheck.catalog import CODES

from .scenarios import all_scenarios, findings_of

SCENARIOS = all_scenarios()
GPU_SCENARIOS = all_scenarios(gpu=True)
# runtime-detectable codes without a CPU scenario, and why (documented in REPORT.md)
LEFT_OUT = {
    "LC111": "Accelerate is not installed here: its gating cannot be exercised honestly",
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_findings(scenario, scenario_outcomes) -> None:
    outcome = scenario_outcomes[scenario.name]
    assert outcome.report, f"no report; stderr:\n{outcome.stderr[-3000:]}"
    assert findings_of(outcome.report) == set(scenario.expected), outcome.stderr[-3000:]
    assert outcome.exit_code == scenario.exit_code, outcome.stderr[-3000:]
    assert outcome.report["disabled_checks"] == []
    for finding in outcome.report["findings"]:
        assert finding["name"] == CODES[finding["code"]].name
        assert finding["file"] == str(scenario.path)


def test_summary_names_each_finding_with_its_line(scenario_outcomes) -> None:
    outcome = scenario_outcomes["lc101_zero_grad_in_window"]
    assert "loopcheck: 4 optimizer steps, 16 backward passes; backward passes per step: 4 x4" in outcome.stderr
    # `loopcheck check`'s layout: path:line:col: CODE message, then the line and a caret under its code
    assert "runtime/lc101_zero_grad_in_window.py:13:5: LC101 gradients are reset" in outcome.stderr
    assert "(4 times, first at optimizer step 0)\n        optimizer.zero_grad()  # expect: LC101\n" \
           "        ^^^^^^^^^^^^^^^^^^^^^\n" in outcome.stderr


def test_every_runtime_code_of_the_required_families_has_a_scenario() -> None:
    required = {code for code, entry in CODES.items() if entry.runtime
                and (code[:3] in {"LC1", "LC2", "LC3", "LC4"} or code in {"LC601", "LC602", "LC605"})}
    covered = {code for s in SCENARIOS + GPU_SCENARIOS for code, _ in s.expected}
    assert covered | set(LEFT_OUT) == required
    assert not covered & set(LEFT_OUT)


def test_correct_loops_are_covered() -> None:
    correct = {s.name for s in SCENARIOS if not s.expected}
    assert {"ok_gan_two_optimizers", "ok_lbfgs_closure", "ok_foreach_and_fused_optimizers",
            "ok_compiled_model", "ok_accumulation", "ok_bf16_autocast", "ok_grad_scaler"} <= correct
