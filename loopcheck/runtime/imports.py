"""Run a callback right after a module's import completes (post-import hooks).

``loopcheck run`` starts its session when the script first imports torch, so a script that
never does runs as plain Python; the session wraps third-party classes (timm's EMA and
schedulers, ema_pytorch, torch_ema) when their modules are imported, before the script can
build an instance.

A finder at the front of ``sys.meta_path`` answers only for the watched names: it asks the
other finders for the real spec and wraps its loader, whose ``exec_module`` puts the real
loader back (the module sees its own ``__loader__``), runs the module and then the callbacks.
A callback that raises is reported on one line and never breaks the import."""
from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]


class PostImportHooks(MetaPathFinder):
    def __init__(self, on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self.on_error = on_error
        self._finding: set[str] = set()

    def on_import(self, name: str, callback: Callback) -> None:
        """Call ``callback(module)`` once ``name`` is imported; now if it already is."""
        module = sys.modules.get(name)
        if module is not None and not _initializing(module):
            self._call(name, callback, module)
            return
        self.callbacks.setdefault(name, []).append(callback)

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)
        self.callbacks.clear()

    # -- importlib protocol -----------------------------------------------------------
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in self.callbacks or name in self._finding:
            return None
        self._finding.add(name)
        try:
            spec = _find_with_others(self, name, path, target)
        finally:
            self._finding.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, name, self)
        return spec

    def fire(self, name: str, module: ModuleType) -> None:
        for callback in self.callbacks.pop(name, []):
            self._call(name, callback, module)

    def _call(self, name: str, callback: Callback, module: ModuleType) -> None:
        try:
            callback(module)
        except Exception as exc:  # noqa: BLE001 - the user's import must go on
            if self.on_error is not None:
                self.on_error(f"import hook for {name}", exc)


def _initializing(module: ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _find_with_others(self: MetaPathFinder, name: str, path: Any, target: Any) -> ModuleSpec | None:
    for finder in list(sys.meta_path):
        if finder is self:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


class _NotifyingLoader(Loader):
    def __init__(self, inner: Any, name: str, hooks: PostImportHooks) -> None:
        self.inner, self.name, self.hooks = inner, name, hooks

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self.inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.inner
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.inner
        self.inner.exec_module(module)
        self.hooks.fire(self.name, module)

    def __getattr__(self, attr: str) -> Any:  # get_resource_reader, is_package, get_code, ...
        return getattr(self.inner, attr)
