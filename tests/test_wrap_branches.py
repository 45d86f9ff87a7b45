"""LC501 reads the DDP wrap of the variant: a wrap on the other branch of the loop's flag is not its own."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / \
    "accelerate_prepare_only_off_the_manual_accumulation_branch.py"
PREPARES = ("        optimizer, loader = accelerator.prepare(optimizer, loader)\n",
            "        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n")


def test_the_model_prepared_on_the_hand_accumulating_branch_is_flagged() -> None:
    source = FIXTURE.read_text()
    assert [f.code for f in check_source(source, select=["LC501"])] == []
    swapped = source.replace(PREPARES[0], "@@").replace(PREPARES[1], PREPARES[0]).replace("@@", PREPARES[1])
    assert swapped != source
    assert [f.code for f in check_source(swapped, select=["LC501"])] == ["LC501"]


def test_a_model_prepared_on_both_branches_is_flagged() -> None:
    source = FIXTURE.read_text().replace(PREPARES[0], PREPARES[1])
    assert source.count(PREPARES[1]) == 2
    assert [f.code for f in check_source(source, select=["LC501"])] == ["LC501"]
