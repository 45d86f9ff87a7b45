"""The short names model/syntax gives the objects a call is made on."""

from __future__ import annotations

import pytest

from loopcheck.model.syntax import last_part


@pytest.mark.parametrize(("name", "last"), [
    ("self.lr_scheduler", "lr_scheduler"), ("opts[0]", "opts"), ("self.alpha_optimizer[agent_id]", "alpha_optimizer"),
    ("self.actor[agent_id].actor_optimizer", "actor_optimizer"), ("nets[i[0]].opt", "opt"), ("x[self.i]", "x"),
])
def test_last_part_is_the_last_attribute_outside_any_index(name: str, last: str) -> None:
    # HARL's `self.actor[agent_id].actor_optimizer.step()` steps an optimizer, not an `actor`
    assert last_part(name) == last
