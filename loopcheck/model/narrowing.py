"""Which classes an object may be where an event runs under ``isinstance`` tests on it.

``if isinstance(scheduler, OneCycleLR): scheduler.step()`` steps only a ``OneCycleLR``; its ``else``
branch (and ``if not isinstance(scheduler, OneCycleLR):``) every other scheduler. A rule that knows
which constructors may have built the object keeps those of the classes the tests let through.
Classes are compared by their last name (``lr_scheduler.OneCycleLR`` is ``OneCycleLR``): a subclass
is not its base here, so a test that lets only a base class through keeps no constructor, and a test
that turns a class away is read only for torch's own scheduler classes (a project's base class
would turn its subclasses away too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from loopcheck.model.events import Cond
from loopcheck.model.syntax import conjuncts, dotted, func_name, last_part, positional

# torch's concrete schedulers: nothing in a project subclasses these under another name that the
# file could build while the test names the base (`isinstance(s, ReduceLROnPlateau)`)
TORCH_SCHEDULERS = frozenset({
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
    "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
    "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"})


@dataclass(frozen=True)
class KindTest:
    """``isinstance(x, classes)`` holds (``holds``) or fails where the event runs."""

    classes: frozenset[str]
    holds: bool

    def lets_through(self, cls: str) -> bool:
        return (cls in self.classes) == self.holds


def kind_tests(conds: tuple[Cond, ...], receiver: str | None) -> tuple[list[KindTest], tuple[Cond, ...]]:
    """The ``isinstance(receiver, ...)`` tests among an event's conditions (also each of the
    conjuncts of ``if a and isinstance(receiver, C):``), and the conditions left once they are
    taken out. A test that cannot be read as a class check stays among the conditions."""
    tests: list[KindTest] = []
    rest: list[Cond] = []
    for cond in conds:
        if cond.test is None or receiver is None:
            rest.append(cond)
            continue
        parts = conjuncts(cond.test) if not cond.negated else [cond.test]
        read = [(part, _kind_test(part, receiver, not cond.negated)) for part in parts]
        if all(test is None for _, test in read):
            rest.append(cond)
            continue
        tests.extend(test for _, test in read if test is not None)
        rest.extend(replace(cond, test=part) for part, test in read if test is None)
    return tests, tuple(rest)


def lets_through(tests: list[KindTest], cls: str) -> bool:
    return all(test.lets_through(cls) for test in tests)


def _kind_test(test: cst.BaseExpression, receiver: str, holds: bool) -> KindTest | None:
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    if not (isinstance(test, cst.Call) and func_name(test) == "isinstance"):
        return None
    args = positional(test)
    if len(args) != 2 or len(test.args) != 2 or dotted(args[0]) != receiver:
        return None
    kinds = args[1].elements if isinstance(args[1], cst.Tuple) else [cst.Element(args[1])]
    names = [dotted(k.value) if isinstance(k, cst.Element) else None for k in kinds]
    if not names or any(n is None for n in names):
        return None
    classes = frozenset(last_part(n) for n in names if n is not None)
    if not holds and not classes <= TORCH_SCHEDULERS:
        return None  # `not isinstance(s, BaseScheduler)` turns away subclasses the file names otherwise
    return KindTest(classes, holds)
