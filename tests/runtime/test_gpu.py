"""CUDA-only checks: LC602 memory growth, and the proof that loopcheck's hooks add no
host-device synchronisation (the whole loop runs under ``set_sync_debug_mode("error")``).
Results of a real GPU run are in ``benchmarks/results/``."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from .helpers import ROOT, loopcheck_run, python
from .scenarios import all_scenarios, findings_of

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SYNC_FREE_TRAINING = textwrap.dedent("""\
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    data = [(torch.randn(32, 256, device="cuda"), torch.randint(0, 10, (32,), device="cuda"))
            for _ in range(8)]
    ACCUM = 4

    def train(steps):
        model.train()
        for i in range(steps * ACCUM):
            x, y = data[i % len(data)]
            with torch.autocast("cuda", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(x), y) / ACCUM
            scaler.scale(loss).backward()
            if (i + 1) % ACCUM == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)

    train(2)  # lazy initialisation may synchronise once
    torch.cuda.set_sync_debug_mode("error")
    try:
        torch.ones(1, device="cuda").item()
        sys.exit("sync debug mode is not active")
    except RuntimeError:
        pass
    train(3)  # the loop itself is free of synchronisation
    from loopcheck.runtime import watch
    with watch(report=sys.argv[1]):
        train(6)
    torch.cuda.set_sync_debug_mode(0)
    print("sync-free")
""")


def test_hooks_add_no_device_synchronisation(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SYNC_FREE_TRAINING)
    result = python(["train.py", str(tmp_path / "report.json")], tmp_path)
    assert result.returncode == 0 and "sync-free" in result.stdout, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["findings"] == [] and report["disabled_checks"] == []
    assert report["memory"]["source"] == "cuda-allocated"
    assert [s["step"] for s in report["memory"]["per_step"]] == list(range(1, 7))
    assert report["counters"]["backward_per_step"] == {"4": 6}


SCALER_HELPER = textwrap.dedent("""\
    import torch


    class NativeScaler:
        def __init__(self, device):
            self._scaler = torch.amp.GradScaler(device)

        def __call__(self, loss, optimizer, parameters=None, update_grad=True):
            self._scaler.scale(loss).backward()
            if update_grad:
                self._scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                self._scaler.step(optimizer)
                self._scaler.update()
""")

HELPER_AND_CLOSURE_TRAINING = textwrap.dedent("""\
    import sys
    import torch
    from torch import nn
    from scaler_helper import NativeScaler

    device = sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    probe = nn.Linear(256, 10).to(device)
    probe_optimizer = torch.optim.SGD(probe.parameters(), lr=1e-3)
    loss_scaler = NativeScaler(device)
    data = [(torch.randn(32, 256, device=device), torch.randint(0, 10, (32,), device=device))
            for _ in range(8)]
    ACCUM = 4

    def train(steps):
        for i in range(steps * ACCUM):
            x, y = data[i % len(data)]
            with torch.autocast(device, dtype=torch.float16 if device == "cuda" else torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y) / ACCUM
            loss_scaler(loss, optimizer, parameters=model.parameters(), update_grad=(i + 1) % ACCUM == 0)
            if (i + 1) % ACCUM == 0:
                optimizer.zero_grad(set_to_none=True)

                def closure():
                    probe_optimizer.zero_grad()
                    probe_loss = nn.functional.cross_entropy(probe(x), y)
                    probe_loss.backward()
                    return probe_loss

                probe_optimizer.step(closure)

    train(2)  # lazy initialisation may synchronise once
    sync = device == "cuda"
    if sync:
        torch.cuda.set_sync_debug_mode("error")
    train(3)  # the loop itself is free of synchronisation
    from loopcheck.runtime import watch
    with watch(report=sys.argv[1]):
        train(6)
    if sync:
        torch.cuda.set_sync_debug_mode(0)
    print("sync-free")
""")


def test_helper_steps_and_closures_add_no_device_synchronisation(tmp_path: Path) -> None:
    """A step taken in a loss-scaler helper of another module (where the step is placed) and a
    closure step (the checks of closure evaluations) on CUDA under sync debug mode."""
    (tmp_path / "scaler_helper.py").write_text(SCALER_HELPER)
    (tmp_path / "train.py").write_text(HELPER_AND_CLOSURE_TRAINING)
    result = python(["train.py", str(tmp_path / "report.json"), "cuda"], tmp_path)
    assert result.returncode == 0 and "sync-free" in result.stdout, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["findings"] == [] and report["disabled_checks"] == []
    assert report["counters"]["optimizer_steps"] + report["counters"]["skipped_steps"] == 12


@pytest.mark.parametrize("scenario", all_scenarios(gpu=True), ids=lambda s: s.name)
def test_gpu_scenario(scenario, tmp_path: Path) -> None:
    result = loopcheck_run(["--report", str(tmp_path / "r.json"), str(scenario.path)], ROOT)
    assert result.returncode == scenario.exit_code, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert findings_of(report) == set(scenario.expected), result.stderr
    assert report["environment"]["device"].startswith("cuda")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_consistency_sample_waits_for_its_copy_on_a_device_that_is_not_current() -> None:
    """A rank whose tensors live on cuda:1 while cuda:0 is the current device (a script that never
    calls set_device): the sample must wait for its copy on cuda:1, not for an event on cuda:0."""
    from types import SimpleNamespace

    from loopcheck.runtime.checks.consistency import ConsistencySampler

    torch.cuda.set_device(0)
    guard = SimpleNamespace(call=lambda name, fn, *args: fn(*args))
    sampler = ConsistencySampler(SimpleNamespace(torch=torch, guard=guard), every=1)
    busy = torch.randn(2048, 2048, device="cuda:1")
    value = torch.zeros(8, device="cuda:1")
    for _ in range(200):  # cuda:1 stays busy for a while: the sample's copy queues behind this
        busy = torch.tanh(busy @ busy)
    value.copy_(busy[0, :8])
    sampler._sample(0, [value])
    sampler._resolve(block=False)  # reading now, before the copy landed, would keep stale values
    sampler.finish()
    assert sampler.samples[0][1] == value.cpu().tolist()[:4]
