"""LC105 and a break on a value the batch index never takes: ``if i == self.break_iter: break`` with
``self.break_iter = -1`` (a debug cap switched off) ends no pass, so the tail is still carried or
wiped. Only a value the file visibly pins below 0 reads this way; one it may set otherwise (a
parameter, a second assignment, ``+=``, an unpacking) may end a pass on a whole window."""
from __future__ import annotations

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--break_iter", type=int, default={option})
args = parser.parse_args()


class Trainer:
    def __init__(self, model, loader, optimizer, accum{param}):
        self.model, self.loader, self.optimizer, self.accum = model, loader, optimizer, accum
        {init}

    def train(self, epochs):
        {before}
        for epoch in range(epochs):
            for i, (x, y) in {iterable}:
                if {test}:
                    break
                (self.model(x).mean() / self.accum).backward()
                if (i + 1) % self.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
"""


def codes(**parts: str) -> list[str]:
    defaults = {"option": "-1", "param": "", "init": "self.break_iter = -1", "before": "pass",
                "iterable": "enumerate(self.loader)", "test": "i == self.break_iter"}
    source = LOOP.format(**{**defaults, **parts})
    return [f.code for f in check_text(source, "train.py", resolve(select=["LC105"]))]


@pytest.mark.parametrize("parts", [
    {},
    {"test": "self.break_iter == i"},
    {"test": "i == -1"},
    {"test": "i == args.break_iter"},
    {"iterable": "enumerate(self.loader, start=1)"},
    {"init": "self.break_iter = -1\n        self.other = 3"},
], ids=["attribute", "reversed", "literal", "option-default", "enumerate-start-1", "other-attributes"])
def test_a_break_on_a_value_the_index_never_takes_ends_no_pass(parts: dict[str, str]) -> None:
    assert codes(**parts) == ["LC105"]


@pytest.mark.parametrize("parts", [
    {"before": "self.break_iter = len(self.loader) - len(self.loader) % self.accum"},
    {"init": "self.break_iter = break_iter", "param": ", break_iter=-1"},
    {"init": "self.break_iter, self.other = -1, 0", "test": "i == self.break_iter"},
    {"before": "self.break_iter += 8"},
    {"test": "i == 64"},
    {"iterable": "enumerate(self.loader, start=-3)"},
    {"test": "i >= -1"},
], ids=["set-again", "parameter", "unpacked", "incremented", "positive-literal",
        "negative-start", "not-equality"])
def test_a_break_on_a_value_the_file_may_let_the_index_reach_may_end_the_pass(parts: dict[str, str]) -> None:
    assert codes(**parts) == []


def test_an_option_is_not_an_attribute_that_ends_alike() -> None:
    """``args.break_iter`` (an option defaulting to 64) is not ``self.break_iter = -1``."""
    assert codes(test="i == args.break_iter", option="64") == codes(test="i == 64") == []
