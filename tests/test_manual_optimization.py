"""A LightningModule under manual optimization, and a loop around Fabric's backward, accumulate by
their own code, which the rules read; automatic optimization's backward passes stay the framework's."""

from __future__ import annotations

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_MODULE = """
import lightning as L


class Module(L.LightningModule):
    def __init__(self, n):
        super().__init__()
        self.automatic_optimization = False
        self.n = n

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        loss = self.criterion(self.net(batch), batch)
        opt.zero_grad()
        {backward}
        if (batch_idx + 1) % self.n == 0:
            opt.step()
"""


@pytest.mark.parametrize(("backward", "codes"), [
    ("self.manual_backward(loss)", {"LC101", "LC102"}),
    ("self.manual_backward(loss / self.n)", {"LC101"}),
    # Fabric's backward neither zeroes, steps nor divides: the loop's own code accumulates
    ("self.fabric.backward(loss)", {"LC101", "LC102"}),
])
def test_manual_optimization_accumulates_by_its_own_code(backward: str, codes: set[str]) -> None:
    findings = check_text(_MODULE.format(backward=backward), "module.py", resolve(select=["LC101", "LC102"]))
    assert {f.code for f in findings} == codes


def test_manual_backward_with_the_step_elsewhere_stays_the_frameworks() -> None:
    # no optimizer step in the function: whatever steps (a closure, another hook) is not visible here
    code = _MODULE.format(backward="self.manual_backward(loss)").replace("opt.step()", "self.log('x', 1)")
    assert not check_text(code, "module.py", resolve(select=["LC101", "LC102"]))
