"""A step function a framework calls once per batch (pytorch-ignite's ``Engine(update)``), whose
calls are counted on an object it is passed (``engine.state.iteration``)."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

ROOT = Path(__file__).parents[1]
FLAGGED = ROOT / "rules" / "fixtures" / "LC107" / "ignite_update_clips_every_micro_batch.py"
CORRECT = ROOT / "tests" / "fixtures" / "must_not_flag" / "ignite_update_clips_in_step_branch.py"
COUNTER = "engine.state.iteration % args.gradient_accumulation_steps"


def _codes(source: str) -> list[str]:
    return sorted(f.code for f in check_source(source) if f.code != "LC206")


def test_the_call_counter_makes_an_accumulation_window() -> None:
    source = FLAGGED.read_text()
    assert COUNTER in source
    assert _codes(source) == ["LC107", "LC501"]


def test_the_correct_update_clips_in_its_step_branch() -> None:
    source = CORRECT.read_text()
    assert _codes(source) == []
    clip = "            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)\n"
    assert clip in source
    moved = source.replace(clip, "").replace("        if boundary:\n", "        " + clip.strip() + "\n        if boundary:\n")
    assert _codes(moved) == ["LC107"]


def test_an_epoch_or_a_count_kept_on_self_is_not_a_call_counter() -> None:
    source = FLAGGED.read_text()
    for other in ("engine.state.epoch % args.gradient_accumulation_steps",
                  "self.global_step % args.gradient_accumulation_steps"):
        assert _codes(source.replace(COUNTER, other).replace("def update(engine, batch)",
                                                             "def update(self, engine, batch)")) == []
