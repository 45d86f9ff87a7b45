"""LC202 where `scaler.update()` runs only when a test of the unscaled gradients passes: the
iteration that fails it has called `unscale_()` without `update()`, and the next `unscale_()`
raises. Each shape also runs on the CPU, so the finding and the crash are checked together."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

torch = pytest.importorskip("torch")

_LOOP = """
import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
max_norm = 0.0  # every step is skipped
for x, y in loader:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
{gate}
    optimizer.zero_grad()
"""

_THRESHOLD = """\
    if grad_norm <= max_norm:
        scaler.step(optimizer)
        scaler.update()"""

_FLAG = """\
    skip = False
    if grad_norm > max_norm:
        skip = True
    if not skip:
        scaler.step(optimizer)
        scaler.update()"""

_FINITE = """\
    if torch.isfinite(grad_norm) and grad_norm <= max_norm:
        scaler.step(optimizer)
        scaler.update()"""

_UPDATED_ON_BOTH = """\
    if grad_norm <= max_norm:
        scaler.step(optimizer)
        scaler.update()
    else:
        scaler.update()"""

_UPDATED_AFTER = """\
    if grad_norm <= max_norm:
        scaler.step(optimizer)
    scaler.update()"""

_INVARIANT_SWITCH = """\
    if use_scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()"""


def _source(gate: str) -> str:
    return textwrap.dedent(_LOOP).replace("{gate}", gate)


def _lc202(source: str) -> list[int]:
    return [f.line for f in check_text(source, "train.py", resolve()) if f.code == "LC202"]


@pytest.mark.parametrize("gate", [_THRESHOLD, _FLAG, _FINITE], ids=["threshold", "flag", "finite"])
def test_update_behind_a_gradient_test_is_reported_and_raises(gate):
    source = _source(gate)
    unscale_line = source.splitlines().index("    scaler.unscale_(optimizer)") + 1
    assert _lc202(source) == [unscale_line]
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        exec(compile(source, "train.py", "exec"), {})


@pytest.mark.parametrize("gate", [_UPDATED_ON_BOTH, _UPDATED_AFTER], ids=["both-branches", "after"])
def test_update_on_every_path_is_not_reported_and_runs(gate):
    source = _source(gate)
    assert _lc202(source) == []
    exec(compile(source, "train.py", "exec"), {})


def test_update_behind_an_invariant_switch_is_not_reported():
    source = _source(_INVARIANT_SWITCH).replace("max_norm = 0.0", "use_scaler = True")
    assert _lc202(source) == []
    exec(compile(source, "train.py", "exec"), {})
