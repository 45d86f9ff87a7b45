"""A finding that needs accumulation names the configuration count it holds under, and its default."""

from __future__ import annotations

import pytest

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


def test_a_config_value_read_by_its_key_is_named():
    # a YAML config's tuning section (HyenaDNA's soft-prompting eval): the count is read by its key
    source = _HEAD + "cfg_tuning = yaml.safe_load(open(path))['tuning']\n" + _LOOP.format(
        n="cfg_tuning['accumulate_grad_batches']")
    assert _clip_message(source) == _CLIP + " (only when `cfg_tuning['accumulate_grad_batches']` > 1)"


def test_a_key_of_an_argparse_dict_takes_the_option_default():
    source = _HEAD + """parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=1)
args = vars(parser.parse_args())
""" + _LOOP.format(n='args["accum"]')
    assert _clip_message(source) == _CLIP + ' (only when `args["accum"]` > 1; its default is 1)'


def test_a_key_the_file_binds_to_a_literal_adds_nothing():
    source = _HEAD + "cfg = {'accum': 4}\n" + _LOOP.format(n="cfg['accum']")
    assert _clip_message(source) == _CLIP


_TRAINER = """import argparse
import torch
from torch.nn.parallel import DistributedDataParallel
parser = argparse.ArgumentParser()
parser.add_argument("--outdir", type=str, help="where to write")
{option}args = parser.parse_args()
config = {{"lr": 1e-3, "accum_grads": {n}}}
config.update(vars(args))
config["steps_per_epoch"] = 100
{more}
class Trainer:
    def __init__(self, model, optimizer, loader, config):
        self.model = DistributedDataParallel(model)
        self.optimizer = optimizer
        self.loader = loader
        self.config = config
        self.forward_count = 0

    def run_epoch(self):
        for batch in self.loader:
            loss = self.model(batch).mean() / self.config["accum_grads"]
            loss.backward()
            self.forward_count += 1
            if self.forward_count == self.config["accum_grads"]:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.forward_count = 0
"""


@pytest.mark.parametrize(("n", "option", "more", "found"), [
    # birdclef-2021's scripts: the module's config dict, copied into a trainer
    (1, "", "", 0),
    (4, "", "", 1),
    # the options copied in include the key, or the file sets the key: N is not the literal's
    (1, 'parser.add_argument("--accum_grads", type=int, default=1, help="micro-batches")\n', "", 1),
    (1, "", 'config["accum_grads"] = int(os.environ["ACCUM"])', 1),
    (1, "", "config = yaml.safe_load(open(path))", 1),
])
def test_a_count_the_file_binds_to_a_literal_dict_entry(n: int, option: str, more: str, found: int):
    source = _TRAINER.format(n=n, option=option, more=more)
    assert len([f for f in check_source(source) if f.code == "LC501"]) == found


_KAGGLE = """import torch
class CFG:
    epochs = 5
    gradient_accumulation_steps = {n}
    max_grad_norm = 1000
{more}
def train_fn(loader, model, optimizer):
    for step, batch in enumerate(loader):
        loss = model(batch).mean()
        if CFG.gradient_accumulation_steps > 1:
            loss = loss / CFG.gradient_accumulation_steps
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CFG.max_grad_norm)
        if (step + 1) % CFG.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("n", "more", "found"), [
    # the notebook configuration class of Kaggle's solutions (Feedback Prize 3): N is its literal
    (1, "if CFG.debug:\n    CFG.epochs = 1", 0),
    (2, "", 1),
    (1, "CFG.gradient_accumulation_steps = int(os.environ['ACCUM'])", 1),
    (1, "for k, v in vars(args).items():\n    setattr(CFG, k, v)", 1),
])
def test_a_count_the_module_writes_as_a_class_attribute(n: int, more: str, found: int):
    source = _KAGGLE.format(n=n, more=more)
    assert len([f for f in check_source(source) if f.code == "LC107"]) == found


_ACCELERATE = """import argparse
import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_accumulation_steps", type=int, default={default})
args = parser.parse_args()
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(batch).sum()
        accelerator.backward(loss)
        optimizer.step()
        model.zero_grad()
        optimizer.zero_grad()
"""


def test_accelerate_accumulation_option_is_named():
    # `model.zero_grad()` inside accumulate() is not gated by Accelerate, but only matters at N > 1
    found = [f for f in check_source(_ACCELERATE.format(default=1)) if f.code == "LC101"]
    assert len(found) == 1
    assert found[0].message.endswith(" (only when `args.gradient_accumulation_steps` > 1; its default is 1)")


def test_accelerate_accumulation_by_default_adds_nothing():
    found = [f for f in check_source(_ACCELERATE.format(default=4)) if f.code == "LC101"]
    assert len(found) == 1 and found[0].message.endswith("N-1 of N backward passes are thrown away")
