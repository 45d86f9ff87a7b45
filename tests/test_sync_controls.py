"""apex's `disable_allreduce()` is a sync control like `no_sync()`: a loop that switches the
all-reduce off between boundaries is not LC501; the same loop without it is."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC501" / "apex_ddp_disable_allreduce_between_boundaries.py"

GATE = """            if args.local_rank != -1:
                model.disable_allreduce()
                if (step + 1) % args.gradient_accumulation_steps == 0 or (step + 1) == len(train_dataloader):
                    model.enable_allreduce()
"""


def test_apex_allreduce_switched_off_between_boundaries_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert GATE in source
    assert [f.code for f in check_source(source, select=["LC501"])] == []


def test_the_same_apex_loop_without_the_switch_all_reduces_every_micro_batch() -> None:
    source = FIXTURE.read_text().replace(GATE, "")
    backward = source.splitlines().index("                    scaled_loss.backward()") + 1
    assert [(f.code, f.line) for f in check_source(source, select=["LC501"])] == [("LC501", backward)]
