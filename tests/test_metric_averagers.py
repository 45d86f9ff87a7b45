"""An object named like an EMA but built from literals alone (`averager = EMA()`) is handed no model:
it smooths values it is fed later, so LC402 leaves it alone. Given the model and never updated, it
is still LC402."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC402" / "metric_averager_called_each_batch.py"
BUILT = "        averager = EMA()\n"


def _lc402(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC402"])]


def test_a_metric_averager_built_from_nothing_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert BUILT in source
    assert _lc402(source) == []


def test_one_built_from_a_decay_literal_is_not_flagged() -> None:
    assert _lc402(FIXTURE.read_text().replace(BUILT, "        averager = EMA(0.99)\n")) == []
    assert _lc402(FIXTURE.read_text().replace(BUILT, "        averager = EMA(beta=0.9)\n")) == []


def test_a_model_ema_handed_the_model_and_never_updated_is_flagged() -> None:
    shadow = "        shadow = ModelEmaV2(self.model, decay=0.999)"
    source = FIXTURE.read_text().replace(BUILT, BUILT + shadow + "\n")
    line = source.splitlines().index(shadow) + 1
    assert _lc402(source) == [line]
