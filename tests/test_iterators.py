"""Which calls take one batch from an iterator made on the spot, and over what."""

from __future__ import annotations

import libcst as cst
import pytest

from loopcheck.model.iterators import first_batch_of, iterated, taken_from
from loopcheck.model.syntax import source


def _call(code: str) -> cst.Call:
    expr = cst.parse_expression(code)
    assert isinstance(expr, cst.Call)
    return expr


@pytest.mark.parametrize("code, loader", [
    ("next(iter(train_loader))", "train_loader"),
    ("iter(train_loader).next()", "train_loader"),
    ("iter(self.loader).__next__()", "self.loader"),
    ("next(loader.__iter__())", "loader"),
    ("self.loader.__iter__().__next__()", "self.loader"),
    ("next(iter(loader), None)", "loader"),  # a default for an empty loader: still a fresh iterator
])
def test_first_batch_of_names_the_loader(code: str, loader: str) -> None:
    found = first_batch_of(_call(code))
    assert found is not None and source(found) == loader


@pytest.mark.parametrize("code", [
    "next(it)",  # an iterator bound elsewhere: the builder follows the binding
    "it.next()",
    "next(self.gen)",
    "loader.__iter__()",  # an iterator, no batch taken
    "iter(loader)",
    "rng.next(3)",
])
def test_first_batch_of_is_none_without_both_halves(code: str) -> None:
    assert first_batch_of(_call(code)) is None


def test_taken_from_and_iterated() -> None:
    assert source(taken_from(_call("next(it)"))) == "it"
    assert source(taken_from(_call("it.__next__()"))) == "it"
    assert taken_from(_call("it.next(5)")) is None
    assert source(iterated(_call("iter(dl)"))) == "dl"
    assert source(iterated(_call("dl.__iter__()"))) == "dl"
    assert iterated(_call("iter()")) is None
    assert iterated(_call("dl.__iter__(1)")) is None
