"""A clip told the GradScaler's current scale compares scaled gradients with a threshold scaled
alike: not LC201 (whose fix, an `unscale_` first, would make the threshold far too large)."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC201" / "clip_threshold_scaled_by_loss_scale.py"
SCALE = "                scale=self.scaler.get_scale(),\n"


def _lc201(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC201"])]


def test_a_helper_handed_the_loss_scale_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert SCALE in source
    assert _lc201(source) == []


def test_the_same_helper_without_the_scale_clips_scaled_gradients() -> None:
    source = FIXTURE.read_text().replace(SCALE, "")
    clip = source.splitlines().index("            clip_gradients(") + 1
    assert _lc201(source) == [clip]


def test_a_threshold_multiplied_by_the_scale_is_not_flagged_and_a_plain_one_is() -> None:
    source = FIXTURE.read_text()
    helper = source[source.index("            clip_gradients(\n"):source.index(SCALE) + len(SCALE) + len("            )\n")]
    scaled = source.replace(helper, "            torch.nn.utils.clip_grad_norm_(\n"
                                    "                self.model.parameters(), self.config.max_norm * self.scaler.get_scale())\n")
    assert "self.scaler.get_scale())" in scaled
    assert _lc201(scaled) == []
    plain = scaled.replace(" * self.scaler.get_scale())", ")")
    assert _lc201(plain) == [plain.splitlines().index("            torch.nn.utils.clip_grad_norm_(") + 1]
