"""``loopcheck.runtime.watch``: context manager and decorator that installs every hook and
removes all of them, never changes what training computes, and survives its own failures."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from torch import nn

import loopcheck.runtime
from loopcheck.runtime import watch
from loopcheck.runtime.session import active_session

from .helpers import ROOT, env


def _train(accum: int = 4, zero_every_micro_batch: bool = False, steps: int = 3) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(4 * accum * steps, 6), torch.randn(4 * accum * steps, 1)),
        batch_size=4)
    for i, (x, y) in enumerate(loader):
        if zero_every_micro_batch:
            optimizer.zero_grad()  # noqa: LC101 (the bug this helper can switch on)
        (nn.functional.mse_loss(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:  # noqa: LC105 (the loader holds whole windows)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    return model


def _patched_state() -> dict[str, object]:
    from torch.optim import lr_scheduler, optimizer
    from torch.utils.data import dataloader

    return {
        "backward": torch.autograd.backward,
        "clip": torch.nn.utils.clip_grad_norm_,
        "opt": dict(vars(torch.optim.Optimizer)),
        "module": dict(vars(nn.Module)),
        "sched": dict(vars(lr_scheduler.LRScheduler)),
        "scaler": dict(vars(torch.amp.GradScaler)),
        "loader": dict(vars(dataloader.DataLoader)),
        "iter": dict(vars(dataloader._BaseDataLoaderIter)),
        "autocast": dict(vars(torch.amp.autocast_mode.autocast)),
        "pre": dict(optimizer._global_optimizer_pre_hooks),
        "post": dict(optimizer._global_optimizer_post_hooks),
    }


def test_context_manager_reports_and_removes_everything(capsys: pytest.CaptureFixture[str]) -> None:
    before = _patched_state()
    with watch() as session:
        assert active_session() is session
        assert torch.autograd.backward is not before["backward"]
        model = _train(zero_every_micro_batch=True)
    assert _patched_state() == before
    assert active_session() is None
    assert all(not p._post_accumulate_grad_hooks and not p._backward_hooks for p in model.parameters())
    err = capsys.readouterr().err
    assert re.search(r"test_watch\.py:\d+:\d+: LC101 gradients are reset", err), err
    assert "3 optimizer steps, 12 backward passes; backward passes per step: 4 x3" in err


def test_decorator_and_findings(capsys: pytest.CaptureFixture[str]) -> None:
    checker = watch(summary=False)

    @checker
    def train() -> None:
        _train(zero_every_micro_batch=True)

    train()
    assert [(f.code, f.count, f.first_step) for f in checker.findings] == [("LC101", 3, 0)]
    assert capsys.readouterr().err == ""
    train()  # a decorated function can run again, with a fresh session
    assert [f.code for f in checker.findings] == ["LC101"]


def test_training_computes_exactly_the_same() -> None:
    plain = _train()
    with watch(summary=False):
        watched = _train()
    for a, b in zip(plain.parameters(), watched.parameters()):
        assert torch.equal(a, b)


def test_nested_watch_is_a_no_op() -> None:
    with watch(summary=False) as outer:
        with watch(summary=False) as inner:
            assert inner is outer
        assert active_session() is outer
    assert active_session() is None


def test_a_failing_check_is_disabled_with_one_warning(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from loopcheck.runtime.hooks import backward

    def broken(*args: object) -> None:
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(backward.GradTracker, "_after", broken)
    plain = _train()
    checker = watch(summary=False)
    with checker:
        watched = _train()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("loopcheck:")]
    assert warnings == ["loopcheck: internal error in backward tracking (ZeroDivisionError: "
                        "injected); backward tracking is disabled, training continues"]
    for a, b in zip(plain.parameters(), watched.parameters()):
        assert torch.equal(a, b)


def test_the_users_backward_errors_pass_through_unchanged() -> None:
    class Exploding(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            return x * 2

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            raise ValueError("user bug in backward")

    model = nn.Linear(2, 1)
    torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(summary=False):
        with pytest.raises(ValueError, match="user bug in backward"):
            Exploding.apply(model(torch.randn(3, 2))).sum().backward()
        # the failed backward leaves no half-open state: the next one is tracked
        model(torch.randn(3, 2)).sum().backward()
        assert active_session().tracker.current is None


def test_watch_validates_codes_before_starting() -> None:
    with pytest.raises(ValueError, match="unknown rule selector"):
        watch(select="LC9x")
    assert active_session() is None


def test_importing_loopcheck_imports_neither_torch_nor_libcst() -> None:
    code = ("import sys, loopcheck, loopcheck.runtime, loopcheck.runtime.command;"
            "w = loopcheck.runtime.watch(report=None);"
            "assert 'torch' not in sys.modules and 'libcst' not in sys.modules, 'too early';"
            "w.__enter__(); assert 'torch' in sys.modules; w.__exit__(None, None, None);"
            "assert 'libcst' not in sys.modules, 'libcst'")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_package_exports_watch() -> None:
    assert loopcheck.runtime.__all__ == ["watch"]


def test_torch_warnings_keep_pointing_at_the_users_line() -> None:
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with watch(summary=False), pytest.warns(UserWarning, match="before `optimizer.step") as caught:
        scheduler.step()
    assert caught[0].filename == __file__


def test_third_party_ema_classes_are_wrapped_once_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The EMA table covers packages that are not installed here: a stand-in module with the
    same name and method checks the mechanism (wrapping once imported, counting, LC401)."""
    import types

    fake = types.ModuleType("ema_pytorch")

    class EMA:
        def __init__(self, model: nn.Module) -> None:
            self.model = model
            self.calls = 0

        def update(self) -> None:
            self.calls += 1

    fake.EMA = EMA
    monkeypatch.setitem(sys.modules, "ema_pytorch", fake)
    original_update = EMA.update
    checker = watch(summary=False)
    with checker:
        model = nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        ema = EMA(model)
        for _ in range(3):
            model(torch.randn(2, 2)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            ema.update()
            ema.update()
    assert EMA.update is original_update and ema.calls == 6
    assert [(f.code, f.count) for f in checker.findings] == [("LC401", 3)]
