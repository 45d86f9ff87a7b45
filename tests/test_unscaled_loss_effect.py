"""LC102's message says what an undivided accumulated loss changes for the optimizer that steps:
the step size under SGD; under Adam-like optimizers only a coupled weight decay and a clip threshold
notice the N-fold gradient (benchmarks/results/lead-s14/adam_coupled_decay.py: Adam(wd) on the raw sum
follows the same path as Adam(wd / N) on the mean), so with neither there is nothing to report."""
from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source
from tests.projects import write_project

_LOOP = """
import torch


def train(model, loader, args):
    optimizer = torch.optim.{optimizer}
    scaler = torch.amp.GradScaler("cuda")
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if (i + 1) % args.accum == 0 or (i + 1) == len(loader):
{clip}            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
"""
_CLIP = ("            scaler.unscale_(optimizer)\n"
         "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")
_TOO_LARGE = "each optimizer step is `args.accum` times too large"
_UNREAD = ("each optimizer step sees `args.accum` times the window's mean gradient: an SGD step is `args.accum` "
           "times too large (an Adam-like optimizer keeps its step size, but a clip threshold or coupled weight "
           "decay meets the `args.accum`-fold sum)")
_DECAY = "its coupled `weight_decay` weighs `args.accum` times less against the gradient"
_CLIPS = ("the clip threshold meets the sum of `args.accum` micro-batch gradients, so it clips as if set "
          "`args.accum` times lower")
_ADAM = "the step size of an Adam-like optimizer does not change, but "


@pytest.mark.parametrize(("optimizer", "clip", "effect"), [
    ("SGD(model.parameters(), lr=0.1)", "", _TOO_LARGE),
    ("SGD(model.parameters(), lr=0.1)", _CLIP, _TOO_LARGE),
    ("AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)", "", None),  # decoupled: nothing changes
    # a clip alone only moves its threshold (clips as if set N times lower): trains like another setting
    ("AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)", _CLIP, None),
    ("Adam(model.parameters(), lr=1e-3)", _CLIP, None),
    ("Adam(model.parameters(), lr=1e-3)", "", None),
    ("Adam(model.parameters(), lr=1e-3, weight_decay=0.0)", "", None),
    ("Adam(model.parameters(), lr=1e-3, weight_decay=0.05)", "", _ADAM + _DECAY),
    ("Adam(model.parameters(), lr=1e-3, weight_decay=0.05)", _CLIP, _ADAM + _DECAY + " and " + _CLIPS),
    # by position, the decay cannot be told from betas or eps: not read as Adam-like, nor claimed N-fold
    ("Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-8, 0.05)", "", _UNREAD),
    # a scale-invariant optimizer the rule does not list: the step is not claimed N times too large
    ("RMSprop(model.parameters(), lr=1e-3)", "", _UNREAD),
    # RAdam's first steps are momentum SGD (its rectification term undefined): N-fold, not scale-free
    ("RAdam(model.parameters(), lr=1e-3)", "", _UNREAD),
    ("NAdam(model.parameters(), lr=1e-3)", "", None),
    # a decay set in a parameter group is coupled all the same
    ("Adam([{'params': model.parameters(), 'weight_decay': 0.05}], lr=1e-3)", "", _ADAM + _DECAY),
    ("Adam([{'params': model.parameters(), 'weight_decay': 0.0}], lr=1e-3)", "", None),
])
def test_the_message_names_what_the_n_fold_gradient_changes(optimizer: str, clip: str, effect: str | None) -> None:
    source = _LOOP.format(optimizer=optimizer, clip=clip)
    messages = [v.message for v in check_source(source, "train.py") if v.code == "LC102"]
    prefix = "the loss is back-propagated on every micro-batch without being divided by `args.accum`: "
    assert messages == ([] if effect is None else [f"{prefix}{effect} (only when `args.accum` > 1)"])


_FACTORY = """
import torch


def make_optimizer(model, lr):
    return torch.optim.{optimizer}


def train(model, loader, args):
    optimizer = make_optimizer(model, args.lr)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % args.accum == 0:
{clip}            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("optimizer", "clip", "effect"), [
    ("AdoptAtan2(model.parameters(), lr=lr)", "", None),
    ("Adam(model.parameters(), lr=lr)", "", None),
    ("Adam(model.parameters(), lr=lr)", "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
     None),
    ("Adam(model.parameters(), lr=lr, weight_decay=0.05)",
     "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", _ADAM + _DECAY + " and " + _CLIPS),
    ("SGD(model.parameters(), lr=lr)", "", _TOO_LARGE),
])
def test_an_optimizer_a_factory_of_the_file_returns(optimizer: str, clip: str, effect: str | None) -> None:
    source = _FACTORY.format(optimizer=optimizer, clip=clip)
    messages = [v.message for v in check_source(source, "train.py") if v.code == "LC102"]
    prefix = "the loss is back-propagated on every micro-batch without being divided by `args.accum`: "
    assert messages == ([] if effect is None else [f"{prefix}{effect} (only when `args.accum` > 1)"])


_BOUND = """
def bound_gradients(model, max_norm):
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
"""
_PROJECT_LOOP = """
import torch
from utils import bound_gradients


def train(model, loader, args):
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=0.05)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % args.accum == 0 or (i + 1) == len(loader):
            CLIP
            optimizer.step()
            optimizer.zero_grad()
"""


def test_a_clipping_helper_of_the_project_is_named(project: Path, run_cli) -> None:
    """Adam with a coupled decay, whose weight the N-fold sum shrinks; a helper of another module (its
    name says nothing of clipping) also clips the sum against a threshold meant for the mean."""
    write_project(project, {"utils.py": "import torch\n" + _BOUND,
                            "train.py": _PROJECT_LOOP.replace("CLIP", "bound_gradients(model, 1.0)")})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    found = [line for line in out.splitlines() if " LC102 " in line]
    assert len(found) == 1 and "the clip threshold meets the sum" in found[0]
    write_project(project, {"train.py": _PROJECT_LOOP.replace("CLIP", "pass")})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    found = [line for line in out.splitlines() if " LC102 " in line]
    assert len(found) == 1 and "weight_decay" in found[0] and "clip" not in found[0]


_CLASS_CHOSEN = """
import torch


def train(model, loader, args):
    if args.use_8bit_adam:
        import bitsandbytes as bnb

        optimizer_class = bnb.optim.AdamW8bit
    else:
        optimizer_class = torch.optim.{other}
    optimizer = optimizer_class(params=model.parameters(), lr=args.lr)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y){divided}
        loss.backward()
        if (i + 1) % args.accum == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


@pytest.mark.parametrize(("other", "reported"), [("AdamW", False), ("SGD", True)])
def test_an_optimizer_class_chosen_by_a_flag_is_read_through_its_name(other: str, reported: bool) -> None:
    # every class the name is bound to is Adam-like: the N-fold gradient changes no step
    source = _CLASS_CHOSEN.format(other=other, divided="")
    assert bool([v for v in check_source(source, "train.py") if v.code == "LC102"]) == reported


@pytest.mark.parametrize(("other", "reported"), [("AdamW", False), ("SGD", True)])
def test_a_loss_divided_twice_under_an_adam_like_optimizer_changes_no_step(other: str, reported: bool) -> None:
    source = _CLASS_CHOSEN.format(other=other, divided=" / args.accum / args.accum")
    found = [v.message for v in check_source(source, "train.py") if v.code == "LC102"]
    assert bool(found) == reported and all("divided twice" in m for m in found)


_DARKNET = """
import torch
from torch.utils.data import DataLoader


def train(model, dataset, config):
    loader = DataLoader(dataset, batch_size=config.batch // config.subdivisions, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate / {divisor})
    global_step = 0
    for epoch in range(config.epochs):
        optimizer.zero_grad()
        for images, targets in loader:
            global_step += 1
            loss = torch.nn.functional.mse_loss(model(images), targets{reduction})
            loss.backward()
            if global_step % config.subdivisions == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize(("divisor", "reduction", "reported"), [
    ("config.batch", "", False), ("config.epochs", "", True),
    # Darknet's own loss is summed over the samples: the window's sum is the larger batch's, whatever the rate
    ("config.epochs", ', reduction="sum"', False),
])
def test_a_learning_rate_divided_by_the_nominal_batch_divides_by_n(divisor: str, reduction: str,
                                                                   reported: bool) -> None:
    # the loader's batch is `config.batch // config.subdivisions`: `config.batch` holds the N micro-batches
    source = _DARKNET.replace("{divisor}", divisor).replace("{reduction}", reduction)
    assert bool([v for v in check_source(source, "train.py") if v.code == "LC102"]) == reported


_MANUAL = """
import lightning as L
import torch


class Module(L.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        loss = self.model(batch).mean()
        self.manual_backward(loss)
        if (batch_idx + 1) % 4 == 0:
            opt.step()
            opt.zero_grad()

    def configure_optimizers(self):
        return torch.optim.{optimizer}(self.model.parameters(), lr=0.01)
"""


@pytest.mark.parametrize(("optimizer", "reported"), [("AdamW", False), ("SGD", True), ("NovoGrad", True)])
def test_the_optimizer_of_configure_optimizers_is_the_one_stepped(optimizer: str, reported: bool) -> None:
    source = _MANUAL.replace("{optimizer}", optimizer)
    assert bool([v for v in check_source(source, "train.py") if v.code == "LC102"]) == reported
