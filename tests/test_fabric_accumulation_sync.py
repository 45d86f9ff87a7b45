"""A Lightning Fabric loop accumulates by its own code (`fabric.backward` neither steps nor divides):
under a DDP strategy (Fabric's default on several devices) a micro-step loop without
`fabric.no_backward_sync` all-reduces every micro-batch (LC501); an FSDP or DeepSpeed strategy
decides the sync itself, and the rules that read other loops' accumulation leave Fabric's alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC501" / \
    "fabric_micro_step_loop_without_no_backward_sync.py"
STRATEGY = 'Fabric(accelerator="cpu", devices=2, strategy="ddp")'


def _backward_line(source: str) -> int:
    return source.splitlines().index("                self.fabric.backward(loss / self.grad_accum_every)  # LC501") + 1


@pytest.mark.parametrize("fabric", [STRATEGY, "Fabric(devices=4)", "Fabric()"])
def test_a_ddp_fabric_micro_step_loop_without_no_backward_sync_all_reduces(fabric: str) -> None:
    source = FIXTURE.read_text().replace(STRATEGY, fabric)
    assert [(f.code, f.line) for f in check_source(source, select=["LC501"])] == [("LC501", _backward_line(source))]


@pytest.mark.parametrize("fabric", ['Fabric(devices=4, strategy="fsdp")', 'Fabric(strategy="deepspeed_stage_2")',
                                    "Fabric(strategy=FSDPStrategy(sharding_strategy='FULL_SHARD'))"])
def test_an_engine_strategy_decides_the_sync_itself(fabric: str) -> None:
    source = FIXTURE.read_text().replace(STRATEGY, fabric)
    assert check_source(source, select=["LC501"]) == []


@pytest.mark.parametrize("fabric", ['Fabric(accelerator="cuda", devices=1)', "Fabric(devices=devices)"])
def test_one_device_wraps_nothing(fabric: str) -> None:
    source = "devices = 1\n" + FIXTURE.read_text().replace(STRATEGY, fabric)
    assert check_source(source, select=["LC501"]) == []


def test_a_device_count_that_may_exceed_one_still_wraps() -> None:
    source = "devices = 1\n" + FIXTURE.read_text().replace(STRATEGY, "Fabric(devices=devices)")
    source = source.replace("if __name__", "if args.multi_gpu:\n    devices = 8\n\n\nif __name__")
    assert [f.code for f in check_source(source, select=["LC501"])] == ["LC501"]


def test_other_rules_still_leave_the_fabric_loop_to_fabric() -> None:
    # the loss is not divided by N here: LC102 would read a hand-written loop so, not Fabric's
    source = FIXTURE.read_text().replace("loss / self.grad_accum_every", "loss")
    assert [f.code for f in check_source(source)] == ["LC501"]
