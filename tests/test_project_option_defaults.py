"""An early exit that a command-line option turns on (``if args.minibatch_num_train > 0 and i >=
args.minibatch_num_train - 1: break``) is off in a run that does not ask for it when the option's
default is 0, whether this file or another module of the project declares it
(``loopcheck.project.option_defaults``): the pass then takes every batch, and its partial last window
is LC105's. The shape is nii-nn's: the loop in ``nn_manager.py``, the options in
``config_parse/arg_parse.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

MANAGER = """
    import torch


    def run_one_epoch(args, model, loader, optimizer):
        for data_idx, (x, y) in enumerate(loader):
            if data_idx % args.size_accumulate_grad == 0:
                optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y) / args.size_accumulate_grad
            loss.backward()
            if (data_idx + 1) % args.size_accumulate_grad == 0:
                optimizer.step()
            if args.minibatch_num_train > 0 and data_idx >= (args.minibatch_num_train - 1):
                break


    def train(args, model, loader, optimizer):
        for epoch in range(args.epochs):
            run_one_epoch(args, model, loader, optimizer)
"""

ARG_PARSE = """
    import argparse


    def f_args_parsed(argument_input=None):
        parser = argparse.ArgumentParser(description='General argument parse')
        parser.add_argument('--epochs', type=int, default=50)
        parser.add_argument('--size-accumulate-grad', type=int, default=1)
        parser.add_argument('--minibatch-num-train', type=int, default=0,
                            help='use a specified number of mini-batches per epoch (default: 0, not used)')
        return parser.parse_args(argument_input)
"""

MAIN = """
    from config_parse import arg_parse
    from nn_manager import train

    if __name__ == '__main__':
        args = arg_parse.f_args_parsed()
        train(args, None, None, None)
"""


def _partial_windows(run_cli) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "nn_manager.py")
    return [line for line in out.splitlines() if ": LC105" in line]


def _write(project: Path, arg_parse: str = ARG_PARSE) -> None:
    write_project(project, {"nn_manager.py": MANAGER, "config_parse/__init__.py": "",
                            "config_parse/arg_parse.py": arg_parse, "main.py": MAIN})


def test_an_exit_another_module_leaves_off_by_default_keeps_the_tail(project: Path, run_cli) -> None:
    _write(project)
    assert len(_partial_windows(run_cli)) == 1


@pytest.mark.parametrize(("old", "new"), [
    ("default=0,\n", "default=64,\n"),  # the exit is on unless the user turns it off
    ("default=0,\n", "default=DEFAULT_BATCHES,\n"),  # computed: not read
    ("type=int, default=0,\n", "type=int,\n"),  # None: the test would raise, not read
])
def test_an_exit_on_by_default_or_unknown_may_end_the_pass_on_a_window(project: Path, run_cli, old: str,
                                                                       new: str) -> None:
    assert old in ARG_PARSE
    _write(project, ARG_PARSE.replace(old, new))
    assert _partial_windows(run_cli) == []


def test_two_declarations_of_the_option_are_not_read(project: Path, run_cli) -> None:
    _write(project)
    (project / "config_parse" / "other.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--minibatch-num-train', type=int, "
        "default=0)\n")
    assert _partial_windows(run_cli) == []


def test_a_changed_default_invalidates_the_cached_result(project: Path, run_cli) -> None:
    _write(project)
    assert len(_partial_windows(run_cli)) == 1
    (project / "config_parse" / "arg_parse.py").write_text(
        ARG_PARSE.replace("default=0,\n", "default=64,\n").replace("\n    ", "\n").lstrip())
    assert _partial_windows(run_cli) == []


TRAIN_WARMUP = """
    import torch
    from argument import parser
    from warmup_scheduler import GradualWarmupScheduler

    args = parser.parse_args()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epoch)
    warmup = GradualWarmupScheduler(optimizer, multiplier=args.lr_multiplier, total_epoch=10, after_scheduler=cosine)

    for epoch in range(args.epoch):
        warmup.step()
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
"""

ARGUMENT = """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument('--epoch', default=200, type=int)
    parser.add_argument('--lr_multiplier', default={multiplier}, type=float, help='learning rate multiplier')
"""


@pytest.mark.parametrize(("multiplier", "reported"), [("1.0", False), ("10.0", True)])
def test_a_warmup_from_zero_by_an_option_of_another_module_is_not_skipped_by_stepping_first(
        project: Path, run_cli, multiplier: str, reported: bool) -> None:
    """pytorch-gradual-warmup-lr's ``GradualWarmupScheduler`` ramps from a learning rate of 0 at
    ``multiplier=1``: stepping it at the top of the epoch skips only that (OpenCoS's
    ``--lr_multiplier``, default 1.0 in ``argument.py``); from 10 it ramps from the base rate."""
    write_project(project, {"train.py": TRAIN_WARMUP, "argument.py": ARGUMENT.format(multiplier=multiplier)})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    assert bool([line for line in out.splitlines() if ": LC302" in line]) is reported
