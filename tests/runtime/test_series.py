"""The report's per-step ``series``: what the scenarios record, and the recorder's bounded
memory past 20,000 steps."""
from __future__ import annotations

import math

import pytest
import torch

from loopcheck.runtime import series
from loopcheck.runtime.hooks.scaler import ScaleMirror
from loopcheck.runtime.series import Series, read_lrs


def _row(step: int, backward: int = 4, lr: float = 0.1, memory: int | None = 100) -> tuple:
    return (step, backward, [lr], None, memory, step + 1, 0, 0, step)


def test_columns_are_aligned_and_complete_below_the_limit() -> None:
    recorder = Series()
    for step in range(10):
        recorder.add(_row(step, lr=0.1 * step))
    recorder.note_skipped(3)
    data = recorder.as_json(0)
    assert data["step"] == list(range(10))
    assert data["lr"][4] == [pytest.approx(0.4)]
    assert data["skipped"] == [3]
    assert data["downsampled"] is False
    lengths = {len(data[k]) for k in ("step", "backward_passes", "lr", "scale", "memory_bytes")}
    assert lengths | {len(v) for v in data["ticks"].values()} == {10}


def test_downsampling_keeps_memory_bounded_and_the_spikes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(series, "LIMIT", 200)
    recorder = Series()
    total = 5000
    for step in range(total):
        backward = 9 if step == 3333 else 4  # one irregular window
        memory = 10_000 if step == 4321 else 100 + step % 7  # one memory spike
        lr = math.cos(step / total)
        recorder.add(_row(step, backward, lr, memory))
        assert len(recorder.rows) <= 200
    data = recorder.as_json(0)
    assert data["downsampled"] == {"method": "min-max buckets", "kept": len(data["step"]), "total": total}
    assert 3333 in data["step"] and 4321 in data["step"]
    assert max(data["backward_passes"]) == 9 and max(data["memory_bytes"]) == 10_000
    assert data["step"] == sorted(data["step"]) and data["step"][0] == 0
    assert data["lr"][0] == [1.0]  # the peak LR of the first step survives


def test_lr_list_is_reused_while_nothing_changes() -> None:
    groups = [{"lr": 0.1}, {"lr": 0.01}]
    first = read_lrs(groups, None)
    assert read_lrs(groups, first) is first
    groups[1]["lr"] = 0.02
    assert read_lrs(groups, first) == [0.1, 0.02]
    assert read_lrs([{"lr": torch.tensor(0.5)}], None) == [0.5]  # a CPU tensor LR is read


def test_scale_mirror_follows_grad_scaler_through_skips_and_growth() -> None:
    """The host-side scale must equal what GradScaler computes on its device."""
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    mirror = ScaleMirror(scaler)
    for i in range(12):
        x = torch.ones(1, 2) * (float("inf") if i in (2, 7) else 1.0)
        scaler.scale(model(x).sum()).backward()
        ran = []
        handle = optimizer.register_step_post_hook(lambda *args: ran.append(True))
        scaler.step(optimizer)
        handle.remove()
        mirror.step_done(not ran)
        scaler.update()
        mirror.updated(scaler, None)
        optimizer.zero_grad()
        assert mirror.value == scaler.get_scale(), i
    assert mirror.value == 1024.0 * 2 * 0.5 * 2 * 0.5  # grew twice, backed off twice


def test_scenario_series(scenario_outcomes) -> None:
    report = scenario_outcomes["ok_grad_scaler"].report
    data = report["series"]
    assert report["schema"] == "loopcheck-runtime-report/2"
    assert data["step"] == [0, 1, 2, 3] and data["backward_passes"] == [2, 2, 2, 2]
    # StepLR(step_size=2) from 0.01: the LR each step used
    assert [lrs[0] for lrs in data["lr"]] == pytest.approx([0.01, 0.01, 0.001, 0.001])
    assert data["scale"] == [65536.0] * 4  # a CPU scaler's scale, read without a sync
    assert data["ticks"]["scheduler"] == [0, 1, 2, 3] and data["ticks"]["zero_grad"] == [0, 1, 2, 3]
    assert all(isinstance(m, int) for m in data["memory_bytes"])  # every step of a short run
    collapsed = scenario_outcomes["lc207_loss_scale_collapse"].report["series"]
    assert collapsed["skipped"] == list(range(12))
    assert collapsed["scale"][:3] == [65536.0, 32768.0, 16384.0]
