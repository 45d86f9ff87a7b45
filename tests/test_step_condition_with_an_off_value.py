"""`if not N or (i + 1) % N == 0:`: a step condition where a setting of 0 (or 1, or None) turns
accumulation off. Each side of the setting is a variant of its own, so the accumulating side is read
as accumulating; the finding names the setting and its default; and `loss / N` is not offered where
N may be 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loopcheck.engine import check_source

ROOT = Path(__file__).parents[1]
FIXTURE = ROOT / "rules" / "fixtures" / "LC102" / "accumulation_off_at_zero_not_divided.py"
CORRECT = ROOT / "tests" / "fixtures" / "must_not_flag" / "accumulation_off_at_zero_divided_no_sync.py"

_LOOP = """import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, loader, optimizer, N, epochs):
    model = DDP(model)
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if {condition}:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("condition", [
    "not N or (i + 1) % N == 0",
    "N == 1 or (i + 1) % N == 0",
    "N <= 1 or (i + 1) % N == 0",
    "N is None or (i + 1) % N == 0",
])
def test_the_accumulating_side_of_an_off_value_is_read(condition: str) -> None:
    codes = sorted(f.code for f in check_source(_LOOP.format(condition=condition)))
    assert codes == ["LC102", "LC105", "LC501"]


def test_the_off_side_alone_steps_every_batch() -> None:
    # N is a flag of the file's own: where it is off (`if not N: step`), nothing accumulates
    source = _LOOP.format(condition="not N")
    assert [f.code for f in check_source(source)] == []


def test_the_finding_names_the_setting_and_its_default_of_zero() -> None:
    [finding] = check_source(FIXTURE.read_text())
    assert finding.code == "LC102"
    assert finding.message.endswith("(only when `args.grad_accumulation` > 1; its default is 0)")


def test_no_division_is_offered_where_the_count_may_be_zero() -> None:
    [off] = [f for f in check_source(_LOOP.format(condition="not N or (i + 1) % N == 0")) if f.code == "LC102"]
    [plain] = [f for f in check_source(_LOOP.format(condition="(i + 1) % N == 0")) if f.code == "LC102"]
    assert off.fix_message is None
    assert plain.fix_message == "divide the loss by N where it is back-propagated"


def test_the_correct_loop_is_not_flagged_and_the_fixture_runs_on_both_sides() -> None:
    assert check_source(CORRECT.read_text()) == []
    for argv in ([], ["--grad_accumulation", "4"]):
        subprocess.run([sys.executable, "-c", f"import runpy, sys; sys.argv = ['x', *{argv!r}]; "
                        f"runpy.run_path({str(FIXTURE)!r}, run_name='__main__')"], check=True, timeout=120)
