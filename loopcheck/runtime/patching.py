"""Thin class-level wrappers for the places torch has no hook, each undone on exit."""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any


def replace_attr(stack: ExitStack, owner: Any, name: str,
                 make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``owner.name`` (a plain function attribute of a class or module) by
    ``make(original)``; restore the exact original object when ``stack`` closes."""
    had_own = isinstance(owner, type) and name in owner.__dict__
    original = owner.__dict__[name] if had_own else getattr(owner, name, None)
    if original is None or not callable(original):
        return False
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    wrapper.__loopcheck_original__ = original  # type: ignore[attr-defined]
    setattr(owner, name, wrapper)
    if isinstance(owner, type) and not had_own:
        stack.callback(delattr, owner, name)
    else:
        stack.callback(setattr, owner, name, original)
    return True


def call_with_user_warnings(original: Callable[..., Any], site: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``original``; warnings it raises with ``stacklevel=2`` would point at the wrapper,
    so they are caught and re-issued at the user's line (``site``). Costs a
    ``catch_warnings``: used only where torch warns (a scheduler's first steps)."""
    if site is None:
        return original(*args, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = original(*args, **kwargs)
        finally:
            pending = list(caught)
    for w in pending:  # after catch_warnings restored the user's filters
        warnings.warn_explicit(w.message, w.category, site.file, site.line)
    return result
