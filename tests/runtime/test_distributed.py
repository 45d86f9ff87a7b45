"""The runtime checker under torchrun (issue 6): the ``runtime/ddp_*.py`` scenarios run on 2 CPU
ranks with gloo, in two torchrun jobs started side by side (each start costs seconds): one runs
every scenario in turn (``ddp_batch_runner``), the other the crashing one through
``python -m loopcheck run`` as users launch it. Scenario docstrings say what the merged report
must show besides the ``# expect:`` findings: ``ddp-expect: consistent`` (the sampled gradients
agree), ``diverged N`` (they differ from step N), ``effective-batch N``, ``fsdp1 N``/``fsdp2 N`` (FSDP
modules counted), ``per-step N`` (backward passes per optimizer step on every rank), ``crash R``, ``independent``
(ranks that never exchange gradients).
Unit tests of the merge, the rank detection and the consistency comparison need no torchrun."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopcheck.runtime.checks import consistency
from loopcheck.runtime.hooks.distributed import configure, detect_rank
from loopcheck.runtime.output.merge import find_parts, merge_parts, ranks_label, summary_lines
from loopcheck.runtime.output.parts import part_path

from .helpers import ROOT, env
from .scenarios import SCENARIOS, Scenario, findings_of, load

DDP_SCENARIOS = [load(p) for p in sorted(SCENARIOS.glob("ddp_*.py"))]
BATCH = [s for s in DDP_SCENARIOS if "crash" not in s.path.stem]
CRASH = next(s for s in DDP_SCENARIOS if "crash" in s.path.stem)
_DDP_EXPECT = re.compile(r"ddp-expect:\s*([^\n\"]+)")


def _expectations(scenario: Scenario) -> dict[str, str | None]:
    match = _DDP_EXPECT.search(scenario.path.read_text())
    items = [item.strip().split() for item in match.group(1).split(",")] if match else []
    return {item[0]: (item[1] if len(item) > 1 else None) for item in items if item}


def _cuda() -> bool:
    """The scenarios use NCCL on CUDA devices (the GPU run), gloo elsewhere."""
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


def _torchrun_available() -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_gloo_available() and shutil.which("torchrun") is not None


needs_torchrun = pytest.mark.skipif(not _torchrun_available(), reason="needs torch.distributed with gloo and torchrun")


def _torchrun(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    environ = dict(env(), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                 "--nproc_per_node=2", *args], cwd=cwd, env=environ,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_all(processes: list[subprocess.Popen[bytes]], timeout: float) -> list[int] | None:
    """Exit codes, or None (every job's process group killed) when one does not finish in time."""
    try:
        return [p.wait(timeout=timeout) for p in processes]
    except subprocess.TimeoutExpired:
        for p in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        return None


@dataclass
class Runs:
    batch: Path
    crash: Path
    crash_exit: int


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    batch, crash = tmp_path_factory.mktemp("ddp-batch"), tmp_path_factory.mktemp("ddp-crash")
    jobs = [[s.path.stem, *s.args, "--report", str(batch / f"{s.path.stem}.json"), str(s.path)] for s in BATCH]
    (batch / "jobs.json").write_text(json.dumps(jobs))
    codes = None
    # A torchrun job on a busy 2-core machine has been seen to hang once (rendezvous): one retry.
    for _ in range(2):
        processes = [
            _torchrun(["-m", "tests.runtime.ddp_batch_runner", str(batch)], ROOT, batch / "torchrun.log"),
            _torchrun(["-m", "loopcheck", "run", "--report", str(crash / "r.json"), *CRASH.args, str(CRASH.path)],
                      ROOT, crash / "torchrun.log"),
        ]
        codes = _wait_all(processes, timeout=180)
        if codes is not None:
            break
    assert codes is not None, "torchrun jobs did not finish twice: " + (batch / "torchrun.log").read_text()[-4000:]
    assert codes[0] == 0, (batch / "torchrun.log").read_text()[-4000:]
    return Runs(batch, crash, codes[1])


@needs_torchrun
@pytest.mark.parametrize("scenario", BATCH, ids=lambda s: s.path.stem)
def test_ddp_scenario(scenario: Scenario, runs: Runs) -> None:
    name, out = scenario.path.stem, runs.batch
    stderr = (out / f"{name}.rank0.stderr").read_text()
    assert [(out / f"{name}.rank{r}.exit").read_text() for r in (0, 1)] == ["0", "0"], stderr[-3000:]
    merged = json.loads((out / f"{name}.json").read_text())
    parts = [json.loads((out / f"{name}.rank{r}.json").read_text()) for r in (0, 1)]
    assert findings_of(merged) == set(scenario.expected), stderr[-3000:]
    for finding in merged["findings"]:
        assert finding["ranks"] == [0, 1]
        assert finding["file"] == str(scenario.path)
    assert merged["disabled_checks"] == []
    section = merged["distributed"]
    assert section["merged"] and section["world_size"] == 2 and section["ranks_reported"] == [0, 1]
    assert section["steps_agree"] and section["backend"] == ("nccl" if _cuda() else "gloo")
    assert [p["distributed"]["rank"] for p in parts] == [0, 1]
    assert all(p["environment"]["world_size"] == 2 for p in parts)
    expect = _expectations(scenario)
    check = section["consistency"]
    if "consistent" in expect:
        assert check["compared_steps"] >= 1 and check["diverged_at_step"] is None, check
        assert not section["problems"]
    if "diverged" in expect:
        assert check["diverged_at_step"] == int(expect["diverged"]), check
        assert check["diverged_ranks"] == [1]
        assert any("diverged" in p for p in section["problems"])
        assert f"differ from rank 0's at step {expect['diverged']}" in stderr
    fsdp = {kind.upper(): int(expect[kind]) for kind in ("fsdp1", "fsdp2") if kind in expect}
    if fsdp:
        assert section["fsdp"] == fsdp and not section["ranks"][0]["ddp"]
    if "independent" in expect:  # no DDP, FSDP or all-reduce: one replica per rank
        assert any("each rank trains its own replica" in p for p in section["problems"]), section["problems"]
        assert section["effective_batch"]["replicas"] == 1
        assert "replicas agree" not in stderr
    if "per-step" in expect:
        assert [set(p["optimizers"][0]["backward_per_step"]) for p in parts] == [{expect["per-step"]}] * 2
    if "effective-batch" in expect:
        assert section["effective_batch"]["effective_batch"] == int(expect["effective-batch"])
        assert f"effective batch {expect['effective-batch']} = " in stderr
    rank1 = (out / f"{name}.rank1.stderr").read_text()
    assert rank1.splitlines()[-1].startswith("loopcheck: rank 1: ") and "merged summary" in rank1  # after torch's warnings


@needs_torchrun
def test_lc501_counts_redundant_allreduces_and_bytes(runs: Runs) -> None:
    part = json.loads((runs.batch / "ddp_lc501_without_no_sync.rank0.json").read_text())
    ddp = part["distributed"]["ddp"][0]
    grad_bytes = (8 * 16 + 16 + 16 * 1 + 1) * 4
    assert ddp["gradient_bytes"] == grad_bytes
    # 96 forwards: the pre-hook saw 64, DDP's require_forward_param_sync told the rest
    assert (ddp["windows"], ddp["micro_batches"], ddp["synced_micro_batches"]) == (24, 96, 96)
    assert ddp["redundant_allreduces"] == 72 and ddp["redundant_allreduce_bytes"] == 72 * grad_bytes
    message = part["findings"][0]["message"]
    assert f"3 redundant all-reduces of {grad_bytes} bytes each ({3 * grad_bytes} bytes per step)" in message
    stderr = (runs.batch / "ddp_lc501_without_no_sync.rank0.stderr").read_text()
    assert re.search(r"ddp_lc501_without_no_sync\.py:\d+:\d+: LC501 .* on every rank\)", stderr), stderr
    backend = "nccl" if _cuda() else "gloo"
    assert f"merged report of ranks 0, 1 of 2 ({backend}); optimizer steps agree (24 on every rank)" in stderr


@needs_torchrun
def test_correct_no_sync_records_one_sync_per_window(runs: Runs) -> None:
    ddp = json.loads((runs.batch / "ddp_ok_no_sync.rank1.json").read_text())["distributed"]["ddp"][0]
    assert ddp["synced_micro_batches"] == ddp["windows"] == 4 and ddp["micro_batches"] == 16
    assert ddp["redundant_allreduces"] == 0 and ddp["unsynced_last_micro_batches"] == 0


@needs_torchrun
def test_a_crashed_rank_leaves_readable_parts_that_merge_afterwards(runs: Runs) -> None:
    out = runs.crash
    assert runs.crash_exit != 0
    rank1 = json.loads((out / "r.rank1.json").read_text())
    assert rank1["exit"]["how"] == "exception" and rank1["distributed"]["rank"] == 1
    assert rank1["counters"]["optimizer_steps"] == 3
    present = sorted(find_parts(str(out))[str(out / "r.json")])
    assert 1 in present
    for rank in present:  # rank 0 may have been stopped by torchrun, but never half-written
        json.loads((out / f"r.rank{rank}.json").read_text())
    (out / "r.json").unlink(missing_ok=True)
    merged_run = subprocess.run([sys.executable, "-m", "loopcheck", "report", "merge", str(out)],
                                cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60, check=False)
    assert merged_run.returncode == 0, merged_run.stderr
    merged = json.loads((out / "r.json").read_text())
    section = merged["distributed"]
    assert section["ranks_reported"] == present and section["world_size"] == 2
    assert any("rank 1 exception" in p for p in section["problems"]), section["problems"]
    assert f"merged {len(present)} part" in merged_run.stderr and "problem:" in merged_run.stderr


# -- no torchrun ------------------------------------------------------------------------------
def _part(rank: int, steps: int, findings: list[dict], samples: list[tuple[int, list[float]]],
          how: str = "finished") -> dict:
    return {"schema": "loopcheck-runtime-report/1", "exit": {"how": how, "code": 0 if how == "finished" else 1},
            "findings": findings, "disabled_checks": [],
            "counters": {"optimizer_steps": steps, "backward_passes": steps * 4},
            "memory": {"peak_bytes": None},
            "distributed": {"rank": rank, "world_size": 3, "backend": "gloo", "effective_batch": None,
                            "consistency": {"every": 2, "samples": [{"step": s, "values": v} for s, v in samples]}}}


def _finding(code: str, line: int, step: int) -> dict:
    return {"code": code, "name": "n", "severity": "warning", "message": "m", "file": "t.py",
            "line": line, "count": 2, "first_step": step}


def test_merge_unions_findings_and_reports_cross_rank_problems() -> None:
    same = [(0, [1.0, 2.0]), (2, [1.5, 2.5]), (4, [1.75, 3.0])]
    drift = [(0, [1.0, 2.0]), (2, [1.5, 2.5]), (4, [1.75, 3.5])]
    merged = merge_parts([_part(1, 9, [_finding("LC501", 5, 3)], drift),
                          _part(0, 10, [_finding("LC501", 5, 1), _finding("LC502", 7, 2)], same)])
    assert [(f["code"], f["ranks"], f["count"], f["first_step"]) for f in merged["findings"]] == [
        ("LC501", [0, 1], 4, 1), ("LC502", [0], 2, 2)]
    section = merged["distributed"]
    assert section["missing_ranks"] == [2] and not section["steps_agree"]
    assert section["consistency"] == {"every": 2, "compared_steps": 3, "diverged_at_step": 4,
                                      "last_agreeing_step": 2, "diverged_ranks": [1]}
    problems = " | ".join(section["problems"])
    assert "rank 2 wrote no report" in problems and "rank 0 10, rank 1 9" in problems
    assert "differ from rank 0's at step 4" in problems and "still agreed at step 2" in problems
    assert ranks_label(merged["findings"][0], 3) == " on ranks 0, 1 only"
    assert ranks_label(merged["findings"][1], 3) == " on rank 0 only"
    assert any("problem: rank 2 wrote no report" in line for line in summary_lines(merged, quiet=True))


def test_consistency_tolerates_rounding_only_and_nan() -> None:
    nan = float("nan")
    ok = consistency.compare({0: {"every": 1, "samples": [{"step": 0, "values": [1.0, nan]}]},
                              1: {"every": 1, "samples": [{"step": 0, "values": [1.0 + 1e-9, nan]}]}})
    assert ok["diverged_at_step"] is None and ok["compared_steps"] == 1
    bad = consistency.compare({0: {"samples": [{"step": 0, "values": [1.0]}]},
                               1: {"samples": [{"step": 0, "values": [1.001]}]}})
    assert bad["diverged_at_step"] == 0 and bad["last_agreeing_step"] is None


def test_part_names_and_groups(tmp_path: Path) -> None:
    assert part_path("out/r.json", 3) == "out/r.rank3.json"
    assert part_path("out/report", 0) == "out/report.rank0.json"
    for name in ("r.rank0.json", "r.rank1.json", "x.rank0.json", "r.json", ".r.rank2.json"):
        (tmp_path / name).write_text("{}")
    groups = find_parts(str(tmp_path))
    assert {os.path.basename(k): sorted(v) for k, v in groups.items()} == {"r.json": [0, 1], "x.json": [0]}


def test_rank_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    assert (detect_rank().rank, detect_rank().world_size, detect_rank().source) == (0, 1, "default")
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    info = detect_rank()
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size, info.source) == (5, 1, 8, 4, "env")


def test_consistency_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from argparse import Namespace

    from loopcheck.runtime.hooks.distributed import consistency_every

    monkeypatch.setenv("LOOPCHECK_CONSISTENCY_EVERY", "")  # configure() sets it: restored afterwards
    assert consistency_every() == 16
    configure(Namespace(consistency_every=4, no_consistency_check=False))
    assert consistency_every() == 4
    configure(Namespace(consistency_every=None, no_consistency_check=True))
    assert consistency_every() == 0


def test_merge_command_without_parts(tmp_path: Path) -> None:
    from loopcheck.cli import main

    assert main(["report", "merge", str(tmp_path)]) == 1
    assert main(["report", "merge", str(tmp_path / "missing")]) == 2


def test_dataparallel_accumulation_is_not_lc501() -> None:
    """DataParallel has no sync flag to read (one process): its micro-batches are not DDP's."""
    import torch
    from torch import nn

    from loopcheck.runtime import watch

    device = "cuda" if torch.cuda.is_available() else "cpu"  # with GPUs DataParallel wants cuda:0
    # at most 2 replicas: a batch of 4 split over 4 GPUs would leave BatchNorm one sample each (an error)
    replicas = list(range(min(torch.cuda.device_count(), 2))) or None
    with watch(summary=False) as session:
        model = nn.DataParallel(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)).to(device),
                                device_ids=replicas)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(8):
            (model(torch.randn(4, 4, device=device)).sum() / 4).backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
    # split over 2+ GPUs the BatchNorm sees 2 samples per device: LC503, rightly
    assert {f.code for f in session.findings.all()} == ({"LC503"} if torch.cuda.device_count() > 1 else set())
    section = session.dist.section()
    assert section["world_size"] == 1 and section["ddp"][0]["type"] == "DataParallel"
    assert section["ddp"][0]["micro_batches"] == 0 and section["effective_batch"]["effective_batch"] == 16  # 4 x 4 x 1
