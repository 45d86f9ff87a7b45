"""Which ``update`` calls of an EMA average weights (LC401 counts them per micro-batch)."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURES = Path(__file__).parent / "fixtures" / "must_not_flag"


def test_an_average_of_numbers_is_not_a_weight_ema_but_one_of_the_model_is() -> None:
    source = (FIXTURES / "loss_statistic_ema_per_micro_batch.py").read_text()
    assert [f.code for f in check_source(source, select=["LC401"])] == []
    scalar = 'self.lecam_ema.update(torch.mean(real_adv_output).item(), "D_real", current_step)'
    assert scalar in source
    for weights in ("self.lecam_ema.update(self.Dis)", "self.lecam_ema.update(self.Dis, current_step)",
                    "self.lecam_ema.update()"):
        assert [f.code for f in check_source(source.replace(scalar, weights), select=["LC401"])] == ["LC401"], weights
