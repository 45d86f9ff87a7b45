"""A training loop whose result nothing observes (a timing benchmark of a throw-away layer) gets no
LC103; any way the training could be seen keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source

TIMING = (Path(__file__).parent / "fixtures" / "must_not_flag" / "timing_loop_throwaway_layer.py").read_text()
STEP = "        optimizer.step()\n\n    elapsed"


def _codes(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC103"])]


def test_timing_loop_of_a_throwaway_layer_is_silent() -> None:
    assert _codes(TIMING) == []


@pytest.mark.parametrize(("old", "new"), [
    # the loss or the outputs read: the summed gradients show in what is printed or kept
    (STEP, "        optimizer.step()\n        print(loss.item())\n\n    elapsed"),
    (STEP, "        optimizer.step()\n        print(result.mean())\n\n    elapsed"),
    (STEP, "        optimizer.step()\n        losses = loss\n\n    elapsed"),
    # the layer or its optimizer read after the loop, or handed out
    ("    return elapsed", "    return layer"),
    ("    return elapsed", "    torch.save(layer.state_dict(), 'layer.pt')\n    return elapsed"),
    ("    return elapsed", "    return elapsed, optimizer"),
    ("    layer = nn.Sequential(", "    global layer\n    layer = nn.Sequential("),
    # not built here: the caller keeps it
    ("def time_layer(d_model", "def time_layer(layer, d_model"),
    ("    layer = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, d_model))\n",
     "    layer = model\n"),
    # a second name for the layer, a closure over it
    ("    hidden_state = torch.ones", "    kept = layer\n    hidden_state = torch.ones"),
    ("    hidden_state = torch.ones", "    forward = lambda x: layer(x)\n    hidden_state = torch.ones"),
])
def test_any_way_to_observe_the_training_keeps_the_finding(old: str, new: str) -> None:
    source = TIMING.replace(old, new)
    assert source != TIMING
    assert _codes(source) == ["LC103"]
