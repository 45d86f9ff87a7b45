"""Which constructors an ``isinstance`` test on a scheduler lets through (model/narrowing.py)."""

from __future__ import annotations

import libcst as cst
import pytest

from loopcheck.model import Cond
from loopcheck.model.narrowing import kind_tests, lets_through


def _cond(test: str, negated: bool = False) -> Cond:
    return Cond(cst.parse_expression(test), negated, cst.Pass(), "orelse" if negated else "body")


@pytest.mark.parametrize("test, negated, through, turned_away", [
    ("isinstance(scheduler, OneCycleLR)", False, {"OneCycleLR"}, {"CosineAnnealingLR", "build_scheduler"}),
    ("isinstance(scheduler, lr_scheduler.OneCycleLR)", False, {"OneCycleLR"}, {"StepLR"}),
    ("isinstance(scheduler, (OneCycleLR, CyclicLR))", False, {"OneCycleLR", "CyclicLR"}, {"StepLR"}),
    # the else branch of the test, and `not isinstance(...)`
    ("isinstance(scheduler, OneCycleLR)", True, {"CosineAnnealingLR", "SequentialLR"}, {"OneCycleLR"}),
    ("not isinstance(scheduler, ReduceLROnPlateau)", False, {"StepLR"}, {"ReduceLROnPlateau"}),
    ("scheduler is not None and isinstance(scheduler, OneCycleLR)", False, {"OneCycleLR"}, {"StepLR"}),
])
def test_an_isinstance_test_lets_its_classes_through(test: str, negated: bool, through: set[str],
                                                      turned_away: set[str]) -> None:
    tests, rest = kind_tests((_cond(test, negated),), "scheduler")
    assert tests
    assert all(lets_through(tests, cls) for cls in through)
    assert not any(lets_through(tests, cls) for cls in turned_away)
    # what is not a class test stays a condition of the step (`scheduler is not None`)
    assert len(rest) == (1 if " and " in test else 0)


@pytest.mark.parametrize("test, negated", [
    ("isinstance(other, OneCycleLR)", False),  # another object
    ("isinstance(scheduler, kinds[0])", False),
    ("isinstance(scheduler, OneCycleLR) or args.per_batch", False),
    # turning a project's base class away would turn away its subclasses, which the file names otherwise
    ("isinstance(scheduler, BaseScheduler)", True),
    ("not isinstance(scheduler, _LRScheduler)", False),
    # the else branch of `a and isinstance(...)`: either may have failed
    ("args.per_batch and isinstance(scheduler, OneCycleLR)", True),
])
def test_other_tests_stay_conditions(test: str, negated: bool) -> None:
    tests, rest = kind_tests((_cond(test, negated),), "scheduler")
    assert tests == [] and len(rest) == 1
