"""What the hooks record about backward passes and optimizer windows.

A *window* of an optimizer is everything between two of its steps (a step that GradScaler
skipped also closes one). Backward passes that reached the optimizer's parameters are the
window's entries; under gradient accumulation a window holds N micro-batches."""
from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .callsite import Site
from .hooks.loss_scale import LossScale
from .series import Series

HISTORY_LIMIT = 10_000  # windows kept per optimizer for the end-of-run analysis


@dataclass(eq=False, slots=True)
class BackwardInfo:
    seq: int
    site: Site | None
    scale: LossScale | None = None
    scaled: bool = False  # the loss went through an enabled GradScaler.scale
    retain_graph: bool = False
    epoch: tuple[int, int] | None = None  # (loader id, loader pass) of the last batch fetched
    in_step: bool = False  # ran inside optimizer.step(closure)
    targets: int = 0  # optimizers whose gradients it reached


@dataclass(eq=False)
class Window:
    number: int
    entries: list[tuple[BackwardInfo, bool]] = field(default_factory=list)  # (backward, reset before it)
    in_step_backwards: int = 0
    closure_added: Site | None = None  # a closure backward that added to the previous one's gradients
    clip_before_backward: Site | None = None  # a clip while the window had no backward yet
    resets: list[tuple[int, Site | None]] = field(default_factory=list)  # (entry index, zero_grad site)
    lr: float | None = None  # param_groups[0]["lr"] at the window's latest backward
    lr_changes: int = 0  # backward passes of the window that saw another LR than the one before
    scheduler_steps: int = 0  # LRScheduler steps of this optimizer during the window
    writer_site: Site | None = None  # a third-party scheduler (timm) stepped here
    carried: bool = False  # its first backward added to gradients left from before the last step
    reset_after_carry: bool = False
    clip_site: Site | None = None  # a clip since the window's last backward
    reset_site: Site | None = None  # the zero_grad call behind a reset inside the window
    zeroed_after_backward: Site | None = None  # a zero_grad since the window's last backward
    closure_zeroed: Site | None = None  # a zero_grad inside the step after its last backward
    zero_grad_calls: int = 0

    def passes(self) -> int:
        """Backward passes that reached the optimizer in this window, closure ones included."""
        return len(self.entries) + self.in_step_backwards

    @property
    def scaled(self) -> bool:
        """An entry's loss went through GradScaler.scale."""
        return any(bw.scaled for bw, _ in self.entries)

    def dominant(self) -> list[tuple[BackwardInfo, bool]]:
        """Entries of the backward line that ran most often: the accumulation micro-batches.
        Other lines in the same window are extra losses (a GAN's real and fake halves)."""
        entries = self.entries
        if not entries:
            return []
        first = entries[0][0].site
        for bw, _ in entries:  # a plain loop: this runs at every optimizer step
            if bw.site != first:
                break
        else:
            return entries
        site = Counter(bw.site for bw, _ in entries).most_common(1)[0][0]
        return [entry for entry in entries if entry[0].site == site]


@dataclass
class WindowSummary:
    size: int  # micro-batches (dominant backward line)
    epochs: tuple[tuple[int, int], ...]  # loader passes its backwards came from, in order
    exhausted: bool  # the step came after its loader pass had run out
    covered_epoch: bool  # the window held every batch its loader pass had yielded by the step
    site: Site | None  # the backward line
    step_site: Site | None
    step_call: Site | None  # the loop's call of a helper that took the step (step_site.py)
    step: int
    dropped_epoch: bool  # a reset discarded backwards of an earlier loader pass


@dataclass(eq=False)
class OptimizerRecord:
    ref: weakref.ref[Any]
    index: int
    kind: str
    site: Site | None
    window: Window = field(default_factory=lambda: Window(0))
    steps: int = 0
    skipped: int = 0
    consecutive_skips: int = 0
    last_skipped: bool = False
    last_size: int = 0  # micro-batches of the previous window
    in_step: bool = False
    scaler_stepping: bool = False
    post_hook_fired: bool = False
    total_backwards: int = 0
    params: int = 0
    sizes: Counter[int] = field(default_factory=Counter)  # micro-batches (dominant line) per window
    passes: Counter[int] = field(default_factory=Counter)  # backward passes per window (all)
    history: list[WindowSummary] = field(default_factory=list)
    carried_streak: int = 0
    step_site: Site | None = None
    step_call: Site | None = None  # the loop's call of a helper that took the step
    first_lr: float | None = None
    max_lr: float | None = None
    probes: list[Any] = field(default_factory=list)  # hooks.backward.Probe
    pending_reset: bool = False  # seen before the current backward, applied if it reaches us
    pending_carry: bool = False
    pending_added: bool = False
    zero_calls_at_step: int = 0  # zero_grad calls before the step started (closure checks)
    fused: bool = False
    adopted: bool = False  # existed before the session started
    resumed: bool = False  # load_state_dict before its first step: a resumed run
    lrs: list[float | None] | None = None  # LR of each param group at the latest step
    lr_micro_windows: int = 0  # windows whose LR changed between each two of their backward passes
    lr_micro_first: tuple[int, int] | None = None  # (step, micro-batches) of the first such window of 3+
    lr_micro_reported: bool = False  # LC301 from the observed LR
    lr_locator: Any = None  # hooks.lr_writer.LrWriterLocator, started once
    lr_writer: Site | None = None  # the line that writes the LR, where known
    scale: Any = None  # hooks.scaler.ScaleMirror of the GradScaler that steps it
    series: Series = field(default_factory=Series)

    @property
    def active(self) -> bool:
        return bool(self.steps or self.skipped or self.total_backwards) or not self.adopted

    def as_json(self) -> dict[str, object]:
        return {"index": self.index, "type": self.kind, "params": self.params,
                "created_at": str(self.site) if self.site else None, "steps": self.steps,
                "skipped_steps": self.skipped, "backward_passes": self.total_backwards,
                "backward_per_step": {str(k): v for k, v in sorted(self.passes.items())},
                "first_lr": self.first_lr, "max_lr": self.max_lr}
