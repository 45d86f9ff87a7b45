"""Whether a loop runs inside a pytest test function.

A ``test_*`` function in a file pytest collects (``test_*.py``, ``*_test.py``) or under a ``tests/``
folder checks a property of a few hand-written steps (two modules' gradients accumulated the same
way, an optimizer wrapper's update): it trains no model that is used afterwards.

>>> pytest_file("tests/optim/test_wrapper.py"), pytest_file("train.py"), pytest_file("tests/helpers.py")
(True, False, True)
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopcheck.model import FileModel, Loop


def pytest_file(filename: str) -> bool:
    """``test_*.py``, ``*_test.py``, or a file under a ``tests/`` folder."""
    path = PurePath(filename)
    return path.suffix == ".py" and (path.name.startswith("test_") or path.name.endswith("_test.py")
                                     or "tests" in path.parts[:-1])


def in_pytest_test(model: FileModel, loop: Loop) -> bool:
    """Whether ``loop`` is in a ``test_*`` function (a pytest test) of a file pytest collects: not an
    evaluation function called ``test``, nor a ``test_*`` helper of a training script."""
    function = loop.function
    return function is not None and function.name.value.startswith("test_") and pytest_file(model.filename)
