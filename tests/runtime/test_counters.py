"""Counters and positions in the scenarios' reports (beyond the findings their markers name)."""
from __future__ import annotations


def test_third_party_ema_built_before_training_is_counted(scenario_outcomes) -> None:
    report = scenario_outcomes["project_lc402_third_party_ema"].report
    assert report["counters"]["ema"] == [{"type": "EMA", "updates": 6}, {"type": "EMA", "updates": 0}]
    assert report["series"]["ticks"]["ema"] == [0, 1, 2, 3, 4, 5]
