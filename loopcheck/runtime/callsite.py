"""The user's source line behind a hook: the first frame outside torch, loopcheck and the
training frameworks that call torch on the user's behalf."""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from types import FrameType
from typing import NamedTuple

_FRAMEWORKS = ("torch", "loopcheck", "accelerate", "lightning", "pytorch_lightning",
               "transformers", "timm", "ema_pytorch", "torch_ema", "deepspeed", "runpy")
_skip_prefixes: tuple[str, ...] | None = None


class Site(NamedTuple):
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _prefixes() -> tuple[str, ...]:
    global _skip_prefixes
    if _skip_prefixes is None:
        found = [os.path.dirname(os.path.abspath(__file__ + "/.."))]  # the loopcheck package
        for name in _FRAMEWORKS:
            path = _origin(name)
            if path:
                found.append(os.path.dirname(os.path.abspath(path)) if
                             os.path.basename(path) == "__init__.py" else os.path.abspath(path))
        found.append(os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep)
        _skip_prefixes = tuple(found)
    return _skip_prefixes


def _origin(name: str) -> str | None:
    """Where a framework lives, imported or not (a framework imported after the first call
    must not count as user code); finding a top-level package does not import it."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def refresh() -> None:
    """Forget the cached framework paths (frameworks may be imported after the session starts)."""
    global _skip_prefixes
    _skip_prefixes = None
    _framework_code.clear()
    _sites.clear()


_framework_code: dict[object, bool] = {}  # code object -> belongs to a framework
_sites: dict[object, dict[int, Site]] = {}  # code object -> line -> Site (no allocation per call)


def is_user_code(code: object) -> bool:
    """The code object belongs to the user's program (not torch, loopcheck, a framework or the
    standard library)."""
    framework = _framework_code.get(code)
    if framework is None:
        filename = code.co_filename  # type: ignore[attr-defined]
        framework = _framework_code[code] = filename.startswith(_prefixes()) or filename.startswith("<")
    return not framework


def user_site(frame: FrameType | None = None) -> Site | None:
    """Walk outwards from ``frame`` (default: the caller) to the first user frame. Runs on
    every backward: the verdict per code object is cached."""
    frame = frame or sys._getframe(1)
    cache = _framework_code
    while frame is not None:
        code = frame.f_code
        framework = cache.get(code)
        if framework is None:
            filename = code.co_filename
            framework = cache[code] = filename.startswith(_prefixes()) or filename.startswith("<frozen")
        if not framework:
            lines = _sites.get(code)
            if lines is None:
                lines = _sites[code] = {}
            line = frame.f_lineno
            site = lines.get(line)
            if site is None:
                site = lines[line] = Site(code.co_filename, line)
            return site
        frame = frame.f_back
    return None
