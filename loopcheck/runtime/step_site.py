"""Where the user's loop takes a step. A step taken inside a helper of another module that the
loop hands the optimizer (a loss scaler's ``__call__`` doing ``scaler.step(optimizer)`` under
``if update_grad:``, as in timm, MAE, DeiT and ConvNeXt-V2) runs when the loop says so: the
findings about when the optimizer steps (LC105, LC106, LC108) belong at the loop's call of the
helper, which holds the step condition (``update_grad=(i + 1) % N == 0``), not at the helper's
line. The verdict is computed once per step line."""
from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from .callsite import Site, user_site
from .source import in_loop

_helper_lines: dict[Site, bool] = {}  # a step line -> it is a helper's (the loop calls the helper)


def step_sites(optimizer: Any, frame: FrameType | None = None) -> tuple[Site | None, Site | None]:
    """(the user line that takes the step, the loop's call of the helper that holds it or None).
    Runs on every step: ``user_site`` and one dictionary lookup after the first step of a line."""
    frame = frame or sys._getframe(1)
    site = user_site(frame)
    helper = _helper_lines.get(site)  # type: ignore[arg-type]
    if helper is False or site is None:
        return site, None
    while frame is not None and (frame.f_code.co_filename != site.file or frame.f_lineno != site.line):
        frame = frame.f_back  # the frame user_site stopped at
    if frame is None:
        return site, None
    caller = user_site(frame.f_back) if frame.f_back is not None else None
    if helper is None:
        helper = _helper_lines[site] = _is_helper(frame, site, caller, optimizer)
    return site, caller if helper else None


def forget() -> None:
    _helper_lines.clear()


def _is_helper(frame: FrameType, site: Site, caller: Site | None, optimizer: Any) -> bool:
    """The frame's function was handed the optimizer, takes the step outside any loop of its
    own, and is called from user code of another file."""
    if caller is None or caller.file == site.file:
        return False
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    values = frame.f_locals
    if not any(values.get(name) is optimizer for name in names):
        return False
    return in_loop(site) is False
