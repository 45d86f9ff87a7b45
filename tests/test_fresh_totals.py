"""A total made fresh as a tensor of zeros before an inner loop over loss terms holds one step's
graphs: not LC601. The same total made once before the step loop grows every step: LC601."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC601" / "per_step_total_over_feature_extractors.py"
FRESH = "        sum_loss = torch.zeros(n_images)\n"


def _lc601(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC601"])]


def test_a_zeros_total_made_fresh_every_step_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert FRESH in source
    assert _lc601(source) == []


def test_the_same_total_made_once_before_the_steps_is_flagged() -> None:
    source = FIXTURE.read_text().replace(FRESH, "").replace(
        "    for step in range(n_steps):\n", "    sum_loss = torch.zeros(n_images)\n    for step in range(n_steps):\n")
    kept = source.splitlines().index("            sum_loss += loss") + 1
    assert kept in _lc601(source)


def test_a_zero_scalar_tensor_is_a_fresh_total_too() -> None:
    source = FIXTURE.read_text().replace(FRESH, "        sum_loss = torch.tensor(0.0)\n")
    assert _lc601(source) == []
