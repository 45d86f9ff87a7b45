"""Every static rule, one module each; ``RULES`` maps a code to its rule class."""

from __future__ import annotations

import importlib
import pkgutil

from loopcheck.rules._base import Rule, Violation


def _discover() -> dict[str, type[Rule]]:
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule:
                found[value.code] = value
    return dict(sorted(found.items()))


RULES: dict[str, type[Rule]] = _discover()

__all__ = ["RULES", "Rule", "Violation"]
