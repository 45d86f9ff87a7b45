"""LC113's inner-loop overwrite needs a step that trains on the one backward left."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "module_test_repeated_forward_then_input_grad.py"


def test_a_repeated_forward_followed_by_a_step_is_still_flagged() -> None:
    source = FIXTURE.read_text()
    assert [f.code for f in check_source(source, select=["LC113"])] == []
    stepped = source.replace("        m = RunningScale()\n",
                             "        m = RunningScale()\n        opt = torch.optim.SGD([x], lr=0.1)\n").replace(
        "        y.backward(gradient=y_grad)\n", "        y.backward(gradient=y_grad)\n        opt.step()\n")
    assert "torch.optim.SGD([x]" in stepped and "opt.step()" in stepped
    assert [f.code for f in check_source(stepped, select=["LC113"])] == ["LC113"]
