"""Loopcheck must never break training: a failing check is switched off with one warning."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Guard:
    """Runs loopcheck's own code; the first exception of a part disables that part."""

    def __init__(self) -> None:
        self.disabled: set[str] = set()
        self.errors: list[str] = []

    def active(self, part: str) -> bool:
        return part not in self.disabled

    def fail(self, part: str, exc: BaseException) -> None:
        if part in self.disabled:
            return
        self.disabled.add(part)
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        self.errors.append(f"{part}: {line}")
        try:
            print(f"loopcheck: internal error in {part} ({line}); {part} is disabled, "
                  "training continues", file=sys.stderr)
        except Exception:  # a closed stderr must not matter either
            pass

    def call(self, part: str, fn: Callable[..., T], *args: Any) -> T | None:
        if part in self.disabled:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - this is the point of the guard
            self.fail(part, exc)
            return None
