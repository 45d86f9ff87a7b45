"""Which line writes the learning rate, for schedules that are not ``LRScheduler`` objects
(``group["lr"] = lr`` by hand, as nanoGPT and minimind do): a dict write has no hook, so once a
problem with the observed LR is seen, the user's code is line-traced for one optimizer window
and the line after which ``param_groups[0]["lr"]`` changed is the writer.

Started at most once per optimizer, only on the main thread, and never while another trace
function (a debugger, coverage) is installed; it stops at the next step of that optimizer."""
from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from ..callsite import Site, is_user_code

_FRAMES = 8  # user frames up the stack that get a local trace function


class LrWriterLocator:
    def __init__(self, group: dict[str, Any]) -> None:
        self.group = group
        self.last = group.get("lr")
        self.previous: Site | None = None
        self.found: Site | None = None
        self.frames: list[FrameType] = []
        self.active = False
        self.started_at = 0  # the window number it traces

    def start(self, frame: FrameType | None) -> bool:
        if sys.gettrace() is not None or type(self.last) is not float:
            return False
        while frame is not None and len(self.frames) < _FRAMES:
            if is_user_code(frame.f_code):
                frame.f_trace = self._local
                self.frames.append(frame)
            frame = frame.f_back
        if not self.frames:
            return False
        self.active = True
        sys.settrace(self._global)
        return True

    def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        if sys.gettrace() == self._global:
            sys.settrace(None)
        for frame in self.frames:
            if frame.f_trace == self._local:
                frame.f_trace = None
        self.frames.clear()

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._local if event == "call" and is_user_code(frame.f_code) else None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.active:
            return None
        if event in ("line", "return"):
            lr = self.group.get("lr")
            if type(lr) is not float:  # a tensor now: comparing it could synchronise
                self.stop()
                return None
            if lr != self.last:
                self.found = self.previous
                self.stop()
                return None
            if event == "line":
                self.previous = Site(frame.f_code.co_filename, frame.f_lineno)
            elif frame.f_back is not None:  # the caller goes on with its current line
                self.previous = Site(frame.f_back.f_code.co_filename, frame.f_back.f_lineno)
        return self._local
