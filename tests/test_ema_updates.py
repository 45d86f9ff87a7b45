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


_PER_MICRO_BATCH = """
import torch


def train(model, model_ema, loader, optimizer, args):
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        {update}
"""


def test_a_helper_called_on_every_micro_batch_is_not_said_to_update_on_every_one() -> None:
    # RepVGG's `update_model_ema(cfg, ..., cur_iter=idx)` returns early unless `cur_iter % period == 0`:
    # handed the loop's counter, it picks its own micro-batches; handed none, it may update on each
    told = check_source(_PER_MICRO_BATCH.format(update="update_model_ema(args, model, model_ema, cur_iter=i)"),
                        select=["LC401"])
    assert told == []
    helper = check_source(_PER_MICRO_BATCH.format(update="update_model_ema(args, model, model_ema)"),
                          select=["LC401"])
    assert [f.message.split(" (only when")[0] for f in helper] == [
        "`update_model_ema(...)` runs on every micro-batch, not once per optimizer step: each EMA update it makes "
        "between two steps sees unchanged weights (N-1 of N where it updates on every call, the effective decay "
        "then decay ** N)"]
    method = check_source(_PER_MICRO_BATCH.format(update="model_ema.update(model)"), select=["LC401"])
    assert [f.message.split(" (only when")[0] for f in method] == [
        "`model_ema` is updated on every micro-batch: N-1 of N updates see unchanged weights and the effective "
        "decay becomes decay ** N"]


def test_a_helper_handed_the_batch_is_not_told_the_iteration() -> None:
    # the batch the loop draws is no counter: the helper may update on every call
    handed = check_source(_PER_MICRO_BATCH.format(update="update_model_ema(args, model, model_ema, x)"),
                          select=["LC401"])
    assert [f.code for f in handed] == ["LC401"]
