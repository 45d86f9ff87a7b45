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


PROCESS = ROOT / "rules" / "fixtures" / "LC101" / "ignite_process_function_zeroes_every_micro_batch.py"


def test_a_process_function_is_read_only_where_ignite_calls_it() -> None:
    """The function passed to ignite's `Engine` is a batch loop's body however it steps; the same
    function handed to an `Engine` of another library, with a plain step, is not read."""
    source = (ROOT / "rules" / "fixtures" / "LC103" / "ignite_update_never_zeroes.py").read_text()
    assert _codes(source) == ["LC103"]
    assert _codes(source.replace("from ignite.engine import Engine, Events", "from mylib import Engine, Events")) == []


def test_a_step_predicate_of_the_file_counts_the_calls() -> None:
    source = PROCESS.read_text()
    assert "if should_perform_optimizer_step(iteration, args.grad_acc_steps):" in source
    assert _codes(source) == ["LC101", "LC107"]


def test_ignite_own_trainer_with_accumulation_is_silent() -> None:
    """`create_supervised_trainer(..., gradient_accumulation_steps=N)` builds ignite's own update
    function (the library's): nothing of the user's file accumulates, nothing is flagged."""
    source = (
        "import torch\nimport torch.nn as nn\nfrom ignite.engine import create_supervised_trainer\n\n\n"
        "def main(loader, accumulation_steps=4):\n"
        "    model = nn.Linear(8, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "    trainer = create_supervised_trainer(model, optimizer, nn.MSELoss(),\n"
        "                                        gradient_accumulation_steps=accumulation_steps)\n"
        "    trainer.run(loader, max_epochs=3)\n")
    assert _codes(source) == []
