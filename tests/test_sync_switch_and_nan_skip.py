"""LC502 on a trainer's own sync switch entered around the backward only, and LC501 on a backward
that runs on every micro-batch but one whose loss is NaN."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_text
from loopcheck.selection import resolve

_SWITCH = """
from contextlib import contextmanager

from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, modules, accum):
        self.modules = {name: DDP(m) for name, m in modules.items()}
        self.accum = accum

    {decorator}
    def no_sync(self, use=True):
{switch}

    def fit(self, loader):
        for i, batch in enumerate(loader):
            should_step = (i + 1) % self.accum == 0
{body}
            if should_step:
                self.optimizer.step()
                self.optimizer.zero_grad()
"""

_OUTSIDE = """\
            outputs = self.compute_forward(batch)
            loss = self.compute_objectives(outputs, batch)
            with self.no_sync(not should_step):
                (loss / self.accum).backward()"""

_INSIDE = """\
            with self.no_sync(not should_step):
                outputs = self.compute_forward(batch)
                loss = self.compute_objectives(outputs, batch)
                (loss / self.accum).backward()"""


def _codes(source: str, code: str) -> list[tuple[int, str]]:
    source = textwrap.dedent(source)
    return [(f.line, f.code) for f in check_text(source, "train.py", resolve(extend_select=[code])) if f.code == code]


_DDP_FLAG = """\
        flags = [m.require_backward_grad_sync for m in self.modules.values()]
        for m in self.modules.values():
            m.require_backward_grad_sync = not use
        yield
        for m, flag in zip(self.modules.values(), flags):
            m.require_backward_grad_sync = flag"""

_FSDP2_FLAG = """\
        for m in self.modules.values():
            m.set_requires_gradient_sync(not use)
        yield
        for m in self.modules.values():
            m.set_requires_gradient_sync(True)"""


def _switch(body: str, decorator: str = "@contextmanager", switch: str = _DDP_FLAG) -> str:
    return _SWITCH.replace("{decorator}", decorator).replace("{switch}", switch).replace("{body}", body)


def test_a_switch_around_the_backward_only_is_reported_at_the_backward() -> None:
    source = _switch(_OUTSIDE)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if ".backward()" in text)
    assert _codes(source, "LC502") == [(line, "LC502")]


def test_a_switch_around_forward_and_backward_is_not_reported() -> None:
    assert _codes(_switch(_INSIDE), "LC502") == []


def test_a_function_that_is_not_a_context_manager_is_not_read_as_a_switch() -> None:
    assert _codes(_switch(_OUTSIDE, decorator="@staticmethod"), "LC502") == []


def test_a_switch_of_a_flag_read_at_backward_time_is_not_reported() -> None:
    # FSDP2's set_requires_gradient_sync is read when the gradients are reduced, after the forward
    assert _codes(_switch(_OUTSIDE, switch=_FSDP2_FLAG), "LC502") == []


_NAN_SKIP = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
{skip}
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""


def _nan_skip(skip: str) -> str:
    return _NAN_SKIP.replace("{skip}", textwrap.indent(textwrap.dedent(skip).strip("\n"), "    "))


def test_a_backward_skipped_only_for_a_nan_loss_runs_on_every_micro_batch() -> None:
    for skip in ("""
                 if torch.isnan(loss).any():
                     print("NaN loss, skipping")
                 else:
                     loss.backward()
                 """, """
                 if torch.isfinite(loss):
                     loss.backward()
                 """, """
                 if not (torch.isnan(loss) or torch.isinf(loss)):
                     loss.backward()
                 """):
        assert [c for _, c in _codes(_nan_skip(skip), "LC501")] == ["LC501"], skip


def test_a_backward_on_the_nan_branch_or_under_another_condition_is_not_every_micro_batch() -> None:
    for skip in ("""
                 if torch.isnan(loss).any():
                     loss.backward()
                 """, """
                 if torch.isfinite(loss) and keep_batch(i):
                     loss.backward()
                 """, """
                 if not torch.isnan(loss) and keep_batch(i):
                     loss.backward()
                 """, """
                 if not (torch.isnan(loss) and torch.isnan(x).any()):
                     loss.backward()
                 """):
        assert _codes(_nan_skip(skip), "LC501") == [], skip


_ACCELERATE = """
import torch
from accelerate import Accelerator

accelerator = Accelerator({plugin})
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)


def log_prob(batch, net):
    return torch.log_softmax(net(batch["x"]), -1).sum()


for step, batch in enumerate(loader):
{body}
    if (step + 1) % accum == 0:
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    else:
        with accelerator.no_sync(model):
            accelerator.backward(loss)
"""


def _accelerate(body: str, plugin: str = "") -> str:
    return _ACCELERATE.replace("{plugin}", plugin).replace(
        "{body}", textwrap.indent(textwrap.dedent(body).strip("\n"), "    "))


def test_accelerate_no_sync_around_the_backward_only_is_reported() -> None:
    for body in ("loss = model(**batch).loss / accum",
                 "loss = -log_prob(batch, model) / accum",      # a function of the file handed the model
                 "loss = -log_prob(batch, net=model) / accum"):
        source = _accelerate(body)
        line = next(n for n, text in enumerate(source.splitlines(), 1) if "no_sync(model)" in text) + 1
        assert _codes(source, "LC502") == [(line, "LC502")], body


def test_accelerate_no_sync_is_not_read_for_another_module_or_an_engine_plugin() -> None:
    # the function is handed a frozen reference model, not the prepared one
    assert _codes(_accelerate("loss = -log_prob(batch, ref_model) / accum"), "LC502") == []
    # FSDP reads its no_sync at backward time; DeepSpeed's engine decides the sync itself
    for plugin in ("fsdp_plugin=fsdp_plugin", "deepspeed_plugin=ds_plugin"):
        assert _codes(_accelerate("loss = model(**batch).loss / accum", plugin), "LC502") == [], plugin


def test_no_sync_around_the_backward_only_is_reported_for_ddp_not_fsdp() -> None:
    loop = """
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    if (i + 1) % accum != 0:
        with model.no_sync():
            loss.backward()
    else:
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""
    assert [c for _, c in _codes("model = DDP(model, device_ids=[rank])\n" + loop, "LC502")] == ["LC502"]
    assert _codes("model = FSDP(model, device_id=rank)\n" + loop, "LC502") == []
