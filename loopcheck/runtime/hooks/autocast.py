"""float16 autocast regions: ``autocast.__enter__`` is wrapped to note that a float16 region
ran since the last backward (bfloat16 needs no GradScaler and is not noted)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session


class AutocastHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.fp16_seq: int | None = None  # backward count when a float16 region last opened

    def install(self) -> None:
        import torch.amp.autocast_mode as autocast_mode

        replace_attr(self.session.stack, autocast_mode.autocast, "__enter__", self._wrap_enter)

    def _wrap_enter(self, original: Any) -> Any:
        session = self.session
        float16 = session.torch.float16

        def __enter__(ctx: Any) -> Any:
            result = original(ctx)
            if getattr(ctx, "fast_dtype", None) is float16 and getattr(ctx, "_enabled", False):
                self.fp16_seq = session.tracker.seq
            return result

        return __enter__

    def fp16_since_last_backward(self) -> bool:
        return self.fp16_seq is not None and self.fp16_seq >= self.session.tracker.seq - 1
