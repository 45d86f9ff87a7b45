"""The rule catalogue shared by the static and the runtime checker.

One entry per code of ``RULES.md``: the static rules in ``loopcheck.rules`` and the runtime
checks in ``loopcheck.runtime`` look their name and default level up here, so a code means
the same thing on both sides. A released code is never reused.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    """Default level of a code; ``OPT_IN`` codes run only when selected."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    OPT_IN = "opt-in"


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    summary: str
    static: bool
    runtime: bool
    level: Severity
    # The static check runs only when selected (it cannot be precise on real code), the runtime one by default.
    static_opt_in: bool = False


def _c(code: str, name: str, level: str, static: str, runtime: str, summary: str) -> Code:
    return Code(code, name, summary, static != "-", runtime != "-", Severity(level),
                static == "opt-in" and level != "opt-in")


# fmt: off
CODES: dict[str, Code] = {c.code: c for c in [
    _c("LC101", "zero-grad-in-accumulation", "error", "yes", "yes",
       'gradients are zeroed on every micro-batch (optimizer, model or p.grad = None) although the optimizer steps every N micro-batches: N-1 of N backward passes are thrown away'),
    _c("LC102", "unscaled-accumulated-loss", "error", "yes", "yes",
       'under accumulation the loss is not divided by N (or is divided by a wrong or running count) and not normalised by a window-wide count: each step is N times too large or unevenly weighted'),
    _c("LC103", "missing-zero-grad", "error", "yes", "yes",
       'gradients are never cleared between optimizer steps'),
    _c("LC104", "zero-grad-before-step", "error", "yes", "yes",
       'gradients are cleared after backward and before the step that should use them'),
    _c("LC105", "partial-window-carried", "warning", "yes", "yes",
       "the batch count is not a multiple of N and the last window of an epoch is never stepped: its gradients leak into the next epoch's first step or are dropped"),
    _c("LC106", "accumulation-boundary-off-by-one", "error", "yes", "yes",
       'the step condition fires on the wrong micro-batch (i % N == 0 steps after the very first micro-batch, a 1-based counter tested with (i + 1) % N, a modulus that changes mid-run)'),
    _c("LC107", "clip-per-micro-batch", "error", "yes", "yes",
       'gradients are clipped on every micro-batch (partial sums) or after the step, instead of once before the step'),
    _c("LC108", "step-outside-batch-loop", "warning", "yes", "yes",
       'optimizer.step() or backward() sits at the wrong nesting level (e.g. step once per epoch while backward runs per batch, without an explicit whole-epoch intent)'),
    _c("LC109", "double-step", "error", "yes", "yes",
       'the optimizer steps twice on the same gradients in one iteration'),
    _c("LC110", "excessive-accumulation", "opt-in", "yes", "yes",
       'accumulation over more than 16 micro-batches (stale, high-variance windows; prefer data parallelism)'),
    _c("LC111", "accumulation-config-ignored", "error", "yes", "yes",
       'Accelerator(gradient_accumulation_steps=N) (or a framework setting) is configured but the loop never enters accumulate(): no accumulation happens'),
    _c("LC112", "irregular-accumulation", "warning", "-", "yes",
       'the number of backward passes per optimizer step is not constant (apart from a final partial window)'),
    _c("LC113", "accumulation-without-backward", "error", "yes", "yes",
       'micro-batches are collected as "accumulated" but never back-propagated'),
    _c("LC201", "clip-before-unscale", "error", "yes", "yes",
       'clip_grad_norm_/clip_grad_value_ runs on gradients still multiplied by the loss scale'),
    _c("LC202", "scaler-step-without-update", "error", "yes", "yes",
       'scaler.step() without scaler.update() on every path (including skip branches), or update() on every micro-batch'),
    _c("LC203", "step-bypasses-scaler", "error", "yes", "yes",
       'the loss is scaled but optimizer.step() is called directly: scaled gradients, inf/NaN steps not skipped'),
    _c("LC204", "scaler-call-per-micro-batch", "error", "yes", "yes",
       'scaler.unscale_() (or step) on non-boundary micro-batches: mixed scales in one window, RuntimeError on the second call'),
    _c("LC205", "fp16-without-scaler", "warning", "yes", "yes",
       'float16 autocast with backward but no GradScaler: small gradients underflow to zero (bfloat16 is fine)'),
    _c("LC206", "deprecated-amp-api", "warning", "yes", "-",
       'torch.cuda.amp.autocast/GradScaler are deprecated: torch.amp.autocast("cuda"), torch.amp.GradScaler("cuda")'),
    _c("LC207", "loss-scale-collapse", "error", "-", "yes",
       'the scaler keeps skipping steps (inf/NaN) and the scale keeps shrinking'),
    _c("LC301", "scheduler-per-micro-batch", "error", "yes", "yes",
       "a per-step scheduler is stepped on every micro-batch under accumulation (unless Accelerate's prepared scheduler gates it): the schedule runs N times too fast"),
    _c("LC302", "scheduler-before-optimizer", "warning", "yes", "yes",
       'the scheduler steps before the optimizer in an iteration (PyTorch warns once; easy to miss in logs)'),
    _c("LC303", "scheduler-horizon-mismatch", "warning", "yes", "yes",
       "the scheduler's horizon (T_max, total_steps, warmup length) is counted in other units than its stepping (micro-batches vs optimizer steps, epochs vs batches)"),
    _c("LC304", "lr-not-scaled", "warning", "yes", "yes",
       '(a) the code scales the LR by a batch size that leaves out a factor of the effective batch it also uses (lr = base_lr * batch_size / 256 with per-GPU batch_size while accumulating or running data-parallel) — on by default; (b) with a declared reference batch/LR/rule in [tool.loopcheck.lr-scaling], the LR does not follow the rule for the effective batch (micro-batch x accumulation x world size) — opt-in'),
    _c("LC305", "warmup-missing", "opt-in", "opt-in", "yes",
       'a LR scaled up 8x or more from the reference is applied from the first step without warmup'),
    _c("LC306", "scheduler-steps-on-skipped-step", "warning", "-", "yes",
       'the scheduler advances on iterations where GradScaler skipped the optimizer step'),
    _c("LC401", "ema-per-backward", "error", "yes", "yes",
       'the EMA/AveragedModel update runs on every micro-batch instead of once per optimizer step'),
    _c("LC402", "ema-never-updated", "error", "yes", "yes",
       'an EMA model is created (and often saved or evaluated) but never updated in the loop'),
    _c("LC501", "ddp-accumulation-without-no-sync", "warning", "yes", "yes",
       'DDP accumulation all-reduces on every micro-batch instead of the last one (N-1 wasted all-reduces per step)'),
    _c("LC502", "no-sync-misplaced", "error", "yes", "yes",
       'no_sync() / require_backward_grad_sync is applied to the wrong micro-batches (the last one is un-synced, so ranks diverge) or wraps only backward while the forward ran outside it (no effect)'),
    _c("LC503", "batchnorm-without-sync", "warning", "opt-in", "yes",
       'BatchNorm under DataParallel/DDP without SyncBatchNorm on small per-GPU batches'),
    _c("LC601", "loss-kept-with-graph", "warning", "yes", "yes",
       'a graph-carrying tensor (loss, outputs) is accumulated or stored across iterations without .item()/.detach()'),
    _c("LC602", "memory-growth", "warning", "-", "yes",
       'allocated device memory at step boundaries grows steadily across steps'),
    _c("LC603", "batch-size-advice", "info", "-", "yes",
       'measured memory per sample shows a larger micro-batch fits in ~80% of device memory: fewer accumulation steps would train faster at the same effective batch'),
    _c("LC604", "dataloader-iter-recreated", "error", "yes", "-",
       'next(iter(loader)) inside the loop: restarts the loader (and its workers) every step, always yielding its first batches'),
    _c("LC605", "eval-mode-leak", "error", "opt-in", "yes",
       'model.eval() inside the epoch loop is never undone by model.train() before the next training steps'),
]}
# fmt: on

SYNTAX_ERROR = Code("LC000", "syntax-error", "the file could not be parsed", True, False, Severity.ERROR)
# Valid Python that loopcheck could not analyse (its parser failed, crashed or ran out of time): a
# notice about loopcheck, not a problem in the code, so it never fails a run on its own.
NOT_ANALYSED = Code("LC001", "not-analysed", "the file was not analysed: loopcheck's parser failed on it, "
                    "crashed or ran out of time", True, False, Severity.WARNING)
# A suppression comment naming a code that does not exist (`# noqa: LC10l`): it silences nothing.
INVALID_SUPPRESSION = Code("LC002", "invalid-suppression-code", "a suppression comment names a code that "
                           "does not exist, so it silences nothing", True, False, Severity.WARNING)
FILE_CODES = {c.code: c for c in (SYNTAX_ERROR, NOT_ANALYSED, INVALID_SUPPRESSION)}  # not rules: always on

BY_NAME: dict[str, Code] = {c.name: c for c in [*CODES.values(), *FILE_CODES.values()]}


def lookup(code_or_name: str) -> Code | None:
    """Find a code by its code (``LC101``) or its name (``zero-grad-in-accumulation``)."""
    key = code_or_name.strip()
    return CODES.get(key.upper()) or FILE_CODES.get(key.upper()) or BY_NAME.get(key.lower())
