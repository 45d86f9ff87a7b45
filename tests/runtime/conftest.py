"""Shared fixtures of the runtime tests: the scenario scripts are run once per test session,
in two processes side by side (torch is imported once per process)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from .scenarios import Scenario, all_scenarios, run_batch


@dataclass
class Outcome:
    report: dict
    exit_code: int
    stderr: str


@pytest.fixture(scope="session")
def scenario_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    scenarios = all_scenarios()
    halves: list[tuple[list[Scenario], Path]] = [
        (scenarios[0::2], tmp_path_factory.mktemp("scenarios-a")),
        (scenarios[1::2], tmp_path_factory.mktemp("scenarios-b"))]
    processes = [run_batch(batch, out) for batch, out in halves]
    for process in processes:
        process.wait(timeout=600)
    outcomes = {}
    for batch, out in halves:
        for s in batch:
            report = out / f"{s.name}.json"
            outcomes[s.name] = Outcome(
                json.loads(report.read_text()) if report.exists() else {},
                int((out / f"{s.name}.exit").read_text()) if (out / f"{s.name}.exit").exists() else -1,
                (out / f"{s.name}.stderr").read_text() if (out / f"{s.name}.stderr").exists() else "")
    return outcomes
