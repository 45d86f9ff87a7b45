"""A loop's ``for`` index that its body bumps before the step's test (``for step, data in
enumerate(bar): step += 1``) counts from 1 there; a helper's own local of that spelling
(``batch_idx = loss_dict["batch_idx"]`` in an inlined ``update_step``) is another variable."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_text
from loopcheck.selection import resolve

BUMPED = """
def train(model, loader, optimizer, accum):
    for step, data in enumerate(loader):
        step += 1
        loss = model(data).mean() / accum
        loss.backward()
        if step % accum == 0{flush}:
            optimizer.step()
            optimizer.zero_grad()
"""

HELPER = """
class Trainer:
    def update_step(self, model, optim, loss_dict):
        batch_idx = loss_dict["batch_idx"]
        if (batch_idx + 1) % self.accum_grad == 0:
            optim.step()
            optim.zero_grad()

    def train_epoch(self, model, optim, loader):
        for batch_idx, batch in enumerate(loader):
            loss = model(batch).mean() / self.accum_grad
            loss.backward()
            self.update_step(model, optim, {"batch_idx": batch_idx})
"""


def _codes(source: str) -> list[str]:
    return sorted(f.code for f in check_text(textwrap.dedent(source), "train.py", resolve()) if f.code != "LC206")


def test_a_bumped_index_is_one_based_at_the_test() -> None:
    assert _codes(BUMPED.replace("{flush}", " or step == len(loader)")) == []
    assert _codes(BUMPED.replace("{flush}", "")) == ["LC105"]  # the tail, not an off-by-one boundary


def test_a_helper_local_of_the_same_name_is_not_the_loop_index() -> None:
    assert _codes(HELPER) == ["LC105"]
