"""LC105 and a loop-top exit of the batch loop: an exit on a counter that no pass restarts fires only
once the run is done, so every earlier pass still ends on the loader's last batch and leaves its
tail; an exit that a pass can reach (its own counter, a bound set per pass) may end it on a whole
window and keeps LC105 quiet."""
from __future__ import annotations

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
def train(model, loader, optimizer, total_steps, steps_per_epoch, accum):
    step = 1
    {outer}:
        {per_pass}
        for i, (x, y) in enumerate(loader, start=1):
            if {exit_test}:
                break
            (model(x).mean() / accum).backward()
            if i % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                {advance}
"""


def codes(**parts: str) -> list[str]:
    source = LOOP.format(**{"per_pass": "pass", "advance": "step += 1", **parts})
    return [f.code for f in check_text(source, "train.py", resolve(select=["LC105"]))]


@pytest.mark.parametrize(("outer", "exit_test"), [
    ("while step <= total_steps", "step > total_steps"),  # nanoT5: the run's bound restated
    ("for epoch in range(100)", "step > total_steps"),
    ("while True", "step >= total_steps"),
])
def test_an_exit_on_a_run_wide_counter_ends_only_the_last_pass(outer: str, exit_test: str) -> None:
    assert codes(outer=outer, exit_test=exit_test) == ["LC105"]


@pytest.mark.parametrize(("outer", "per_pass", "exit_test", "advance"), [
    ("for epoch in range(100)", "step = 1", "step > steps_per_epoch", "step += 1"),  # restarted each pass
    ("for epoch in range(100)", "pass", "step > (epoch + 1) * steps_per_epoch", "step += 1"),  # bound set per pass
    ("for epoch in range(100)", "end = step + steps_per_epoch", "step > end", "step += 1"),
    ("for epoch in range(100)", "pass", "i > steps_per_epoch * accum", "step += 1"),  # the pass's own index
    ("for epoch in range(100)", "pass", "step > total_steps", "step = step + 1"),  # not a counter the pass advances
])
def test_an_exit_a_pass_can_reach_may_end_it_on_a_whole_window(outer: str, per_pass: str, exit_test: str,
                                                               advance: str) -> None:
    assert codes(outer=outer, per_pass=per_pass, exit_test=exit_test, advance=advance) == []
