"""Loader passes (epochs): which pass each batch came from and when a pass ran out.
``DataLoader.__iter__`` and its iterators' ``__next__`` have no hooks, so both are wrapped."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session

Pass = tuple[int, int]  # (id of the loader, how many times it was iterated)
_MARK = "_loopcheck_pass"


class DataHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.current: Pass | None = None  # pass of the most recent batch
        self.passes: Counter[int] = Counter()
        self.batches: Counter[Pass] = Counter()
        self.exhausted: set[Pass] = set()
        self.batch_sizes: dict[int, int] = {}

    def install(self) -> None:
        from torch.utils.data import dataloader

        stack = self.session.stack
        replace_attr(stack, dataloader.DataLoader, "__iter__", self._wrap_iter)
        replace_attr(stack, dataloader._BaseDataLoaderIter, "__next__", self._wrap_next)

    def _wrap_iter(self, original: Any) -> Any:
        guard = self.session.guard

        def __iter__(loader: Any) -> Any:
            iterator = original(loader)
            guard.call("data loader tracking", self._new_pass, loader, iterator)
            return iterator

        return __iter__

    def _new_pass(self, loader: Any, iterator: Any) -> None:
        self.passes[id(loader)] += 1
        setattr(iterator, _MARK, (id(loader), self.passes[id(loader)]))
        size = getattr(loader, "batch_size", None)
        if size is None:  # DataLoader(batch_sampler=...): the sampler knows
            size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
        if isinstance(size, int):
            self.batch_sizes[id(loader)] = size

    def _wrap_next(self, original: Any) -> Any:
        def __next__(iterator: Any) -> Any:
            try:
                batch = original(iterator)
            except StopIteration:
                marker = getattr(iterator, _MARK, None)
                if marker is not None:
                    self.exhausted.add(marker)
                raise
            marker = getattr(iterator, _MARK, None)
            if marker is not None:
                self.current = marker
                self.batches[marker] += 1
            return batch

        return __next__
