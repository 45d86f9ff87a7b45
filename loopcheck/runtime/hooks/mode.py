"""Train/eval mode: ``Module.train`` (which ``eval`` calls) is wrapped to remember the
outermost modules switched and where ``eval()`` was called; at each backward the models whose
parameters are being optimised must be in training mode if they trained before."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session


@dataclass
class ModeRecord:
    module: weakref.ref[Any]
    eval_site: Site | None = None
    train_seq: int = 0  # backward count when it was last switched to training mode
    trained: bool = False  # a backward ran while it was in training mode
    optimised: bool | None = None  # owns parameters of a watched optimizer (computed lazily)


class ModeHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.modules: weakref.WeakKeyDictionary[Any, ModeRecord] = weakref.WeakKeyDictionary()
        self.in_eval: list[ModeRecord] = []  # switched to eval and not back: checked per backward
        self.depth = 0

    def install(self) -> None:
        import torch

        replace_attr(self.session.stack, torch.nn.Module, "train", self._wrap_train)

    def _wrap_train(self, original: Any) -> Any:
        guard = self.session.guard

        def train(module: Any, mode: bool = True) -> Any:
            if self.depth:  # children switched by their parent
                return original(module, mode)
            guard.call("train/eval tracking", self._switching, module, mode)
            self.depth += 1
            try:
                return original(module, mode)
            finally:
                self.depth -= 1

        return train

    def _switching(self, module: Any, mode: bool) -> None:
        seq = self.session.tracker.seq
        record = self.modules.get(module)
        if record is None:
            record = self.modules[module] = ModeRecord(weakref.ref(module))
        if module.training and seq > record.train_seq:
            record.trained = True  # backward passes ran since it entered training mode
        if mode:
            record.train_seq = seq
            if record in self.in_eval:
                self.in_eval.remove(record)
        else:
            record.eval_site = user_site()
            if record not in self.in_eval:
                self.in_eval.append(record)

    def check_backward(self) -> None:
        """Called before each backward on the main thread; free unless a model is in eval."""
        for record in self.in_eval:
            module = record.module()
            if module is None or module.training or not record.trained:
                continue
            if record.optimised is None:
                owner = self.session.param_owner
                record.optimised = any(id(p) in owner for p in module.parameters())
            if record.optimised:
                self.session.report("LC605", f"{type(module).__name__} trains in eval mode: "
                                    "model.eval() here is not undone by model.train() before "
                                    "the next training steps", record.eval_site)
