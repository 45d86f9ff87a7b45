"""LC105 stays quiet where the code refuses a batch count that is not a multiple of N, and only then;
LC402 sees an EMA updated under another name, by calling a LitEma, or by a base class of elsewhere."""
from __future__ import annotations

import pytest

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
def train(loader, accum, bs):
    {check}
    for epoch in range(3):
        for i, (x, y) in enumerate(loader):
            (model(x).mean() / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


def codes(source: str, select: str) -> list[str]:
    return [f.code for f in check_text(source, "train.py", resolve(select=[select]))]


@pytest.mark.parametrize("check", [
    "assert len(loader) % accum == 0",
    "assert not len(loader) % accum",
    "if len(loader) % accum != 0: raise ValueError('whole windows only')",
    "if len(loader) % accum: raise ValueError('whole windows only')",
    "n = len(loader)\n    if n % accum != 0: raise ValueError('whole windows only')",
])
def test_a_checked_batch_count_leaves_no_partial_window(check: str) -> None:
    assert codes(LOOP.format(check=check), "LC105") == []


@pytest.mark.parametrize("check", [
    "pass",
    "assert bs % accum == 0",  # the batch size, not the number of batches
    "if len(loader) % accum == 0: raise ValueError('inverted')",
    "assert len(loader) % other == 0",  # another modulus
    "assert len(loader) % accum != 0",
])
def test_other_checks_leave_the_partial_window_flagged(check: str) -> None:
    assert codes(LOOP.format(check=check), "LC105") == ["LC105"]


EMA = """
from timm.utils import ModelEmaV2
ema = ModelEmaV2(model, decay=0.999)
{bind}
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    {update}
"""


@pytest.mark.parametrize(("bind", "update"), [
    ("other = ema", "other.update(model)"),
    ("emas = [ema]", "[e.update(model) for e in emas]"),
    ("update_ema = ema.update", "update_ema(model)"),
])
def test_an_ema_updated_under_another_name_is_not_flagged(bind: str, update: str) -> None:
    assert codes(EMA.format(bind=bind, update=update), "LC402") == []


@pytest.mark.parametrize(("bind", "update"), [
    ("state = ema.state_dict()", "pass"),
    ("net = ema.module", "pass"),
    ("ema = ema", "pass"),
])
def test_reading_an_ema_is_not_updating_it(bind: str, update: str) -> None:
    assert codes(EMA.format(bind=bind, update=update), "LC402") == ["LC402"]


def test_a_called_averaged_model_is_evaluated_not_updated() -> None:
    source = EMA.format(bind="", update="pass").replace("ModelEmaV2", "AveragedModel") + "print(ema(x))\n"
    assert codes(source, "LC402") == ["LC402"]


def test_a_class_on_plain_bases_keeps_its_never_updated_ema_flagged() -> None:
    source = """
import torch
from timm.utils import ModelEmaV3
class Trainer(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.ema = ModelEmaV3(model, decay=0.999)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    def fit(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            self.model(x).sum().backward()
            self.optimizer.step()
"""
    assert codes(source, "LC402") == ["LC402"]
    assert codes(source.replace("(torch.nn.Module)", "(BaseTrainer)"), "LC402") == []


def test_an_own_ema_class_is_updated_only_by_a_method_that_changes_weights() -> None:
    source = """
import torch
class EMA:
    def __init__(self, model):
        self.shadow = [p.detach().clone() for p in model.parameters()]
    def {method}(self, model):
        {body}
ema = EMA(model)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    ema.{method}(model)
"""
    updated = source.format(method="after_step", body="[s.lerp_(p, 0.001) for s, p in zip(self.shadow, model.parameters())]")
    assert codes(updated, "LC402") == []
    assert codes(source.format(method="report", body="print(len(self.shadow))"), "LC402") == ["LC402"]


def test_a_helper_that_only_reads_the_ema_leaves_it_flagged() -> None:
    source = EMA.format(bind="", update="pass") + """
def evaluate(net, loader):
    return sum(criterion(net(x), y).item() for x, y in loader)
print(evaluate(ema, val_loader))
"""
    assert codes(source, "LC402") == ["LC402"]
    assert codes(source.replace("return sum", "net.module.load_state_dict(model.state_dict())\n    return sum"),
                 "LC402") == []


def test_a_class_that_hands_itself_to_other_code_may_have_its_ema_updated_there() -> None:
    source = """
import torch
from timm.utils import ModelEmaV2
class Runner:
    def __init__(self, model):
        self.model = model
        self.ema = ModelEmaV2(model, decay=0.999)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    def run(self, loader, hooks):
        for x, y in loader:
            self.optimizer.zero_grad()
            self.model(x).sum().backward()
            self.optimizer.step()
            {after}
"""
    assert codes(source.format(after="for h in hooks: h.after_iter(self)"), "LC402") == []
    assert codes(source.format(after="print(self)"), "LC402") == ["LC402"]


ZEROED_EACH = """
for epoch in range(epochs):
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
"""


def test_a_zeroing_on_every_micro_batch_leaves_no_partial_window_until_it_is_fixed() -> None:
    from loopcheck.fixer import fix_text

    assert codes(ZEROED_EACH, "LC101") == ["LC101"]
    assert codes(ZEROED_EACH, "LC105") == []
    fixed = fix_text(ZEROED_EACH, "t.py", frozenset({"LC101"})).source
    assert "            optimizer.step()\n            optimizer.zero_grad()\n" in fixed  # the fix is applied
    assert codes(fixed, "LC105") == ["LC105"]  # and the window it creates is reported


def test_advice_names_the_loops_own_index_and_loader_when_another_counter_steps() -> None:
    source = """
def train(train_dataloader, args):
    nb_tr_steps = 0
    for epoch in range(3):
        for idx, batch in enumerate(train_dataloader):
            loss = model(batch) / args.gradient_accumulation_steps
            loss.backward()
            nb_tr_steps += 1
            if nb_tr_steps % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        nb_tr_steps = 0
"""
    [finding] = [f for f in check_text(source, "train.py", resolve(select=["LC105"]))]
    assert "add `or (idx + 1) == len(train_dataloader)` to the step condition" in finding.message
