"""LC302 where the batch loop is a same-file function called from the epoch loop: its optimizer is
read as what the call passes, and a step in the branch that runs the batch loop counts."""
from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_source

_TRAIN = """
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()


def main(model, loader, warm_epochs, epochs):
    opt_warm = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_joint = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt_joint, 1)
    for epoch in range(epochs):
"""


@pytest.mark.parametrize(("epoch_body", "flagged"), [
    # the parameter `optimizer` is bound to `opt_joint` at the call: stepped first, every epoch
    ("        sched.step()\n        train(model, loader, opt_joint)\n", True),
    ("        sched.step()\n        train(model=model, loader=loader, optimizer=opt_joint)\n", True),
    # in the branch that trains `opt_joint`
    ("        if epoch < warm_epochs:\n            train(model, loader, opt_warm)\n"
     "        else:\n            sched.step()\n            train(model, loader, opt_joint)\n", True),
    # after the training
    ("        train(model, loader, opt_joint)\n        sched.step()\n", False),
    # the function trains another optimizer in that branch; `opt_joint` in the other one only
    ("        if epoch < warm_epochs:\n            train(model, loader, opt_joint)\n"
     "        else:\n            sched.step()\n            train(model, loader, opt_warm)\n", False),
    # a step under a test that is not the batch loop's
    ("        if epoch % 2:\n            sched.step()\n        train(model, loader, opt_joint)\n", False),
])
def test_a_scheduler_stepped_before_an_inlined_training_function(epoch_body: str, flagged: bool) -> None:
    source = textwrap.dedent(_TRAIN) + epoch_body
    codes = [f.code for f in check_source(source, filename="train.py", select=["LC302"])]
    assert codes == (["LC302"] if flagged else [])



_PASSED = """
def do_train(model, loader, optimizer, optimizer_center, scheduler, epochs):
    for epoch in range(epochs):
"""
_BATCHES = """
        for x, y in loader:
            optimizer.zero_grad()
            optimizer_center.zero_grad()
            model(x).sum().backward()
            optimizer.step()
{between}            optimizer_center.step()
"""


@pytest.mark.parametrize(("before", "between", "flagged"), [
    # at the top of the epoch: before both optimizers, whichever it drives
    ("        scheduler.step()\n", "", True),
    # between the two steps: the file does not say which optimizer it follows
    ("", "            scheduler.step()\n", False),
])
def test_a_scheduler_the_file_does_not_build_with_two_optimizers(before: str, between: str, flagged: bool) -> None:
    source = textwrap.dedent(_PASSED) + before + _BATCHES.format(between=between)
    codes = [f.code for f in check_source(source, filename="processor.py", select=["LC302"])]
    assert codes == (["LC302"] if flagged else [])


@pytest.mark.parametrize(("scheduler", "where", "effect"), [
    # StepLR(step_size=3) stepped first: the LR falls in epoch 2, not 3 (run on CPU: 0.1, 0.1, 0.01, ...)
    ("StepLR(optimizer, step_size=3)", "epoch", "every decay comes one epoch early"),
    ("MultiStepLR(optimizer, milestones=[30, 60])", "epoch", "every decay comes one epoch early"),
    ("MultiStepLR(optimizer, milestones=[30, 60])", "full batch", "every decay comes one epoch early"),
    ("CosineAnnealingLR(optimizer, T_max=10)", "epoch", "the first value of the schedule is skipped"),
    ("CosineAnnealingLR(optimizer, T_max=10)", "full batch", "the first value of the schedule is skipped"),
    # a schedule of batches shifted by one of its values: nothing a run notices
    ("MultiStepLR(optimizer, milestones=[3000, 6000])", "iteration", None),
    ("LambdaLR(optimizer, lambda s: min(1.0, s / 100))", "iteration", None),
])
def test_the_message_says_what_the_early_step_does_to_the_schedule(scheduler: str, where: str,
                                                                    effect: str | None) -> None:
    first = "        scheduler.step()\n"
    head = ("import torch\n\n\ndef train(model, loader, features, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            f"    scheduler = torch.optim.lr_scheduler.{scheduler}\n"
            "    for epoch in range(epochs):\n")
    if where == "full batch":  # one step per epoch on the whole data
        source = head + ("        optimizer.zero_grad()\n        model(features).sum().backward()\n" + first +
                         "        optimizer.step()\n")
    else:
        source = head + (first if where == "epoch" else "") + (
            "        for x, y in loader:\n"
            "            optimizer.zero_grad()\n"
            "            model(x).sum().backward()\n" + ("    " + first if where == "iteration" else "") +
            "            optimizer.step()\n")
    messages = [v.message for v in check_source(source, "train.py") if v.code == "LC302"]
    assert messages == ([f"`scheduler.step()` runs before `optimizer.step()`: {effect}"] if effect else [])


_COSINE_OPTION = """
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()


def main(args, model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    if args.cosine:
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epochs)
    for epoch in range(1, args.epochs + 1):
        if args.cosine:
            scheduler.step()
        else:
            adjust_learning_rate(epoch, args, optimizer)
        train(model, loader, optimizer)
"""


def test_the_message_names_the_option_the_early_step_runs_under() -> None:
    # CMC / GCC's linear evaluation: the cosine schedule (and its early step) only with `--cosine`
    messages = [v.message for v in check_source(_COSINE_OPTION, "eval.py") if v.code == "LC302"]
    assert messages == ["`scheduler.step()` runs before `optimizer.step()`: the first value of the schedule is "
                        "skipped (only when `args.cosine` holds)"]
    # a test of the scheduler itself names no option
    itself = _COSINE_OPTION.replace("        if args.cosine:\n            scheduler.step()\n        else:\n"
                                    "            adjust_learning_rate(epoch, args, optimizer)\n",
                                    "        if scheduler:\n            scheduler.step()\n")
    assert itself != _COSINE_OPTION
    assert [v.message for v in check_source(itself, "eval.py") if v.code == "LC302"] == [
        "`scheduler.step()` runs before `optimizer.step()`: the first value of the schedule is skipped"]
