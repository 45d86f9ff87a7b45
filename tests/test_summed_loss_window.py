"""LC105 for a loss summed as a graph over the window and back-propagated at its boundary
(`acc += loss / N`; `acc.backward(); optimizer.step(); acc = 0` under `(i + 1) % N == 0`): where
each pass sets the sum again before its loop, the pass's tail is never back-propagated. Forms that
close the last window, sums that run on across epochs and sums never set back are not this."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_source

LOOP = """
def train_epoch(model, loader, optimizer, accum):
    summed = 0
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        summed += loss / accum
        if (i + 1) % accum == 0:
            optimizer.zero_grad()
            summed.backward()
            optimizer.step()
            summed = 0


def main(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        train_epoch(model, loader, optimizer, 4)
"""


def _lc105(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in check_source(textwrap.dedent(source), select=["LC105"])]


def test_the_sum_of_an_epoch_function_drops_the_tail() -> None:
    [(line, message)] = _lc105(LOOP)
    assert line == 7
    assert "losses summed into `summed`" in message and "never back-propagated" in message


@pytest.mark.parametrize(("old", "new"), [
    ("        summed += loss / accum\n", "        summed = summed + loss / accum\n"),
    ("        if (i + 1) % accum == 0:", "        if summed > 0 and (i + 1) % accum == 0:"),
    ("            summed = 0\n", "            summed = torch.zeros(())\n"),
])
def test_spellings_of_the_sum_and_its_test(old: str, new: str) -> None:
    assert old in LOOP
    assert [line for line, _ in _lc105(LOOP.replace(old, new))] == [7]


def test_the_else_branch_form_is_read() -> None:
    source = LOOP.replace("        summed += loss / accum\n", "").replace(
        "            summed = 0\n", "            summed = 0\n        else:\n            summed += loss / accum\n")
    assert [line for line, _ in _lc105(source)] == [6]


@pytest.mark.parametrize(("old", "new"), [
    ("(i + 1) % accum == 0:", "(i + 1) % accum == 0 or (i + 1) == len(loader):"),  # closes the last window
    ("            summed = 0\n", ""),  # never set back: the sum grows (not this)
    ("        summed += loss / accum\n", "        summed += loss.item() / accum\n"),  # no graph
    ("    summed = 0\n    for i", "    for i"),  # not set before the pass
    ("        if (i + 1) % accum == 0:", "        if i % accum == 0:"),  # the window's start (LC106's phase)
])
def test_no_tail_dropped_or_not_this_form(old: str, new: str) -> None:
    assert old in LOOP
    assert _lc105(LOOP.replace(old, new)) == []


def test_a_flush_after_the_loop_closes_the_tail() -> None:
    source = LOOP.replace("\n\ndef main", "    if torch.is_tensor(summed):\n        summed.backward()\n"
                                          "        optimizer.step()\n\n\ndef main")
    assert _lc105(source) == []
