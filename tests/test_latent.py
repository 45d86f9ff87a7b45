"""A finding that needs accumulation names the configuration count it holds under, and its default."""

from __future__ import annotations

from loopcheck.engine import check_source

_LOOP = """
for epoch in range(3):
    for step, batch in enumerate(loader):
        loss = model(batch).sum() / {n}
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (step + 1) % {n} == 0:
            optimizer.step()
            optimizer.zero_grad()
"""
_HEAD = """import argparse
import torch
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randn(4, 2) for _ in range(10)]
"""
_CLIP = "gradients are clipped on every micro-batch, on a partial sum of the window: clip once in the step branch, right before the step"


def _clip_message(source: str) -> str:
    found = [f for f in check_source(source) if f.code == "LC107"]
    assert len(found) == 1
    return found[0].message


def test_argparse_default_of_one_is_named():
    source = _HEAD + """parser = argparse.ArgumentParser()
parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
args = parser.parse_args()
""" + _LOOP.format(n="args.gradient_accumulation_steps")
    assert _clip_message(source) == _CLIP + " (only when `args.gradient_accumulation_steps` > 1; its default is 1)"
    window = [f for f in check_source(source) if f.code == "LC105"]
    assert window and window[0].message.endswith(
        " (only when `args.gradient_accumulation_steps` > 1; its default is 1)")


def test_config_dataclass_default_through_a_local_name():
    source = _HEAD + """from dataclasses import dataclass
@dataclass
class Config:
    accum_iter: int = 1
cfg = Config()
accum = cfg.accum_iter
""" + _LOOP.format(n="accum")
    assert _clip_message(source) == _CLIP + " (only when `cfg.accum_iter` > 1; its default is 1)"


def test_parameter_default_of_a_train_function():
    source = _HEAD + "def train(model, loader, optimizer, accum=1):\n" + "\n".join(
        "    " + line for line in _LOOP.format(n="accum").splitlines()) + "\n"
    assert _clip_message(source) == _CLIP + " (only when `accum` > 1; its default is 1)"


def test_no_default_in_the_file_names_the_setting_only():
    source = _HEAD + _LOOP.format(n="config.TRAIN.ACCUMULATION_STEPS")
    assert _clip_message(source) == _CLIP + " (only when `config.TRAIN.ACCUMULATION_STEPS` > 1)"


def test_default_that_accumulates_adds_nothing():
    source = _HEAD + """parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=4)
args = parser.parse_args()
""" + _LOOP.format(n="args.accum")
    assert _clip_message(source) == _CLIP


def test_literal_count_adds_nothing():
    assert _clip_message(_HEAD + _LOOP.format(n="4")) == _CLIP


def test_computed_local_count_adds_nothing():
    source = _HEAD + "accumulate = max(round(64 / 8), 1)\n" + _LOOP.format(n="accumulate")
    assert _clip_message(source) == _CLIP


def test_rule_that_holds_without_accumulation_is_unchanged():
    source = _HEAD + """parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=1)
args = parser.parse_args()
for step, batch in enumerate(loader):
    loss = model(batch).sum() / args.accum
    loss.backward()
    if (step + 1) % args.accum == 0:
        optimizer.step()
"""
    found = [f for f in check_source(source) if f.code == "LC103"]
    assert found and "only when" not in found[0].message
