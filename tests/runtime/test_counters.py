"""Counters and positions in the scenarios' reports (beyond the findings their markers name)."""
from __future__ import annotations


def test_third_party_ema_built_before_training_is_counted(scenario_outcomes) -> None:
    report = scenario_outcomes["project_lc402_third_party_ema"].report
    assert report["counters"]["ema"] == [{"type": "EMA", "updates": 6}, {"type": "EMA", "updates": 0}]
    assert report["series"]["ticks"]["ema"] == [0, 1, 2, 3, 4, 5]


def test_closure_backward_passes_are_counted(scenario_outcomes) -> None:
    """LBFGS evaluates its closure several times per step: those are the step's backward passes."""
    report = scenario_outcomes["ok_lbfgs_closure"].report
    per_step = report["counters"]["backward_per_step"]
    assert "0" not in per_step
    assert sum(int(n) * windows for n, windows in per_step.items()) == report["counters"]["backward_passes"]


def test_gan_steps_count_every_backward_pass_that_reached_them(scenario_outcomes) -> None:
    """The discriminator's window holds its real and fake losses and, from the second iteration
    on, the generator's backward that also went through it; the generator's holds one."""
    report = scenario_outcomes["ok_gan_two_optimizers"].report
    per_step = sorted(list(o["backward_per_step"].items()) for o in report["optimizers"])
    assert per_step == [[("1", 6)], [("2", 1), ("3", 5)]]
    assert report["counters"]["backward_passes"] == 18


def test_batch_sampler_micro_batch_and_a_disabled_scaler(scenario_outcomes) -> None:
    outcome = scenario_outcomes["ok_batch_sampler_and_disabled_scaler"]
    batch = outcome.report["distributed"]["effective_batch"]
    assert (batch["micro_batch"], batch["backward_per_step"], batch["effective_batch"]) == (6, 2, 12)
    assert outcome.report["counters"]["grad_scaler"]["enabled"] is False
    assert outcome.report["series"]["scale"] == [None] * 4
    assert "GradScaler disabled (enabled=False)" in outcome.stderr


def test_a_run_without_optimizer_says_what_was_not_checked(scenario_outcomes) -> None:
    outcome = scenario_outcomes["ok_manual_sgd_only"]
    assert outcome.report["not_checked"] == [
        "LC101-LC113, LC201-LC204, LC207, LC301-LC306, LC401, LC402, LC501, LC502, LC601, LC602, "
        "LC605: 5 backward passes but no optimizer step: the parameters were updated by hand (manual "
        "SGD) or by an optimizer that is not a torch.optim.Optimizer"]
    assert "loopcheck: not checked: LC101-LC113" in outcome.stderr
    assert scenario_outcomes["ok_accumulation"].report["not_checked"] == []


def test_a_count_from_sampled_windows_says_so(scenario_outcomes) -> None:
    """After the first windows the loss is read in one window of 8: the finding counts the
    windows it was seen in, which are fewer than the 40 steps it affected."""
    outcome = scenario_outcomes["lc102_loss_not_divided_long_run"]
    (finding,) = outcome.report["findings"]
    assert finding["sampled"] is True and 16 < finding["count"] < 40
    assert f"seen in {finding['count']} sampled windows" in outcome.stderr
