"""A step condition counting to a setting that only a builder keyword's inert default gives, no caller
of the project setting it, accumulates in no run the project can make: the accumulation rules stay
silent (``loopcheck.project.unset_keywords``). The shape is ACNet's: ``if_accum_grad = iteration %
cfg.grad_accum_iters != 0`` in a DDP trainer, the config a namedtuple that
``get_baseconfig_by_epoch(..., grad_accum_iters=1)`` builds in another module, the entry script calling
it without that keyword. Anything that may set it keeps the findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

BASE_CONFIG = """
    from collections import namedtuple

    BaseConfigByEpoch = namedtuple('BaseConfigByEpoch', ['network_type', 'global_batch_size', 'max_epochs',
                                                         'base_lr', 'output_dir', 'grad_accum_iters', 'deps'])


    def get_baseconfig_by_epoch(network_type, global_batch_size, max_epochs, base_lr, output_dir,
                                grad_accum_iters=1, deps=None):
        print('base_lr:', base_lr)
        return BaseConfigByEpoch(network_type=network_type, global_batch_size=global_batch_size,
                                 max_epochs=max_epochs, base_lr=base_lr, output_dir=output_dir,
                                 grad_accum_iters=grad_accum_iters, deps=deps)


    def get_baseconfig_for_test(network_type, global_batch_size, deps=None):
        return BaseConfigByEpoch(network_type=network_type, global_batch_size=global_batch_size, max_epochs=None,
                                 base_lr=None, output_dir=None, grad_accum_iters=None, deps=deps)
"""

TRAINER = """
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from base_config import BaseConfigByEpoch


    def train_one_step(net, data, label, optimizer, criterion, if_accum_grad=False):
        pred = net(data)
        loss = criterion(pred, label)
        loss.backward()
        if not if_accum_grad:
            optimizer.step()
            optimizer.zero_grad()
        return loss


    def train_main(local_rank, cfg: BaseConfigByEpoch, net, train_data, criterion):
        model = DistributedDataParallel(net.cuda(), device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=cfg.base_lr, momentum=0.9)
        iteration = 0
        for epoch in range(cfg.max_epochs):
            for data, label in train_data:
                if_accum_grad = ((iteration % cfg.grad_accum_iters) != 0)
                loss = train_one_step(model, data, label, optimizer, criterion, if_accum_grad)
                iteration += 1
"""

ENTRY = """
    from base_config import get_baseconfig_by_epoch
    from train import train_main

    if __name__ == '__main__':
        config = get_baseconfig_by_epoch(network_type='resc56', global_batch_size=64, max_epochs=480,
                                         base_lr=0.1, output_dir='acnet_exps/resc56')
        train_main(local_rank=0, cfg=config, net=None, train_data=None, criterion=None)
"""


def _findings(run_cli, path: str = "train.py") -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "ALL", path)
    return [line for line in out.splitlines() if ": LC" in line]


def _accumulation(found: list[str]) -> list[str]:
    return [line for line in found if ": LC102" in line or ": LC501" in line]


def test_a_builder_keyword_no_caller_sets_accumulates_nothing(project: Path, run_cli) -> None:
    write_project(project, {"base_config.py": BASE_CONFIG, "train.py": TRAINER, "acnet/do_acnet.py": ENTRY})
    assert _accumulation(_findings(run_cli)) == []


@pytest.mark.parametrize(("name", "old", "new"), [
    # a caller sets it, by keyword, by position, or through an unpacked dict of options
    ("acnet/do_acnet.py", "output_dir='acnet_exps/resc56')", "output_dir='acnet_exps/resc56', grad_accum_iters=4)"),
    ("acnet/do_acnet.py", "output_dir='acnet_exps/resc56')", "output_dir='acnet_exps/resc56', **options)"),
    ("acnet/do_acnet.py", "        train_main(", "        config = get_baseconfig_by_epoch('r', 8, 1, 0.1, 'x', 8)\n"
                                                 "        train_main("),
    # a command-line option, the config rebuilt or assigned, or the builder handed around
    ("acnet/do_acnet.py", "if __name__", "parser.add_argument('--grad-accum-iters', type=int)\nif __name__"),
    ("acnet/do_acnet.py", "        train_main(", "        config = config._replace(grad_accum_iters=args.accum)\n        train_main("),
    ("acnet/do_acnet.py", "        train_main(", "        config.grad_accum_iters = 4\n        train_main("),
    ("acnet/do_acnet.py", "if __name__", "BUILDERS = {'epoch': get_baseconfig_by_epoch}\nif __name__"),
    # the default itself accumulates
    ("base_config.py", "grad_accum_iters=1, deps=None):", "grad_accum_iters=4, deps=None):"),
])
def test_anything_that_may_set_it_keeps_the_findings(project: Path, run_cli, name: str, old: str, new: str) -> None:
    files = {"base_config.py": BASE_CONFIG, "train.py": TRAINER, "acnet/do_acnet.py": ENTRY}
    assert old in files[name]
    files[name] = files[name].replace(old, new)
    write_project(project, files)
    assert len(_accumulation(_findings(run_cli))) == 2  # LC102 in the helper, LC501 at the loop's call


def test_a_setting_no_project_code_declares_keeps_the_findings(project: Path, run_cli) -> None:
    # the config comes from a YAML file: no builder default says what N is
    write_project(project, {"train.py": TRAINER.replace("from base_config import BaseConfigByEpoch",
                                                        "BaseConfigByEpoch = object")})
    assert len(_accumulation(_findings(run_cli))) == 2


def test_a_new_caller_that_sets_it_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"base_config.py": BASE_CONFIG, "train.py": TRAINER, "acnet/do_acnet.py": ENTRY})
    assert _accumulation(_findings(run_cli)) == []
    (project / "acnet" / "do_big.py").write_text(
        "from base_config import get_baseconfig_by_epoch\n\n"
        "config = get_baseconfig_by_epoch(network_type='r', global_batch_size=8, max_epochs=1, base_lr=0.1,\n"
        "                                 output_dir='x', grad_accum_iters=8)\n")
    assert len(_accumulation(_findings(run_cli))) == 2


ENGINE = """
    import torch


    def fit(model, train_loader, epochs=5, acc_steps=1, lr=5e-4):
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        for epoch in range(epochs):
            optimizer.zero_grad()
            for step, (x, y) in enumerate(train_loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                if (step + 1) % acc_steps == 0:
                    optimizer.step()
                    model.zero_grad()


    def k_fold(model, folds):
        for train_loader in folds:
            fit(model, train_loader, epochs=3, lr=1e-3)
"""


def _partial_window(run_cli) -> list[str]:
    return [line for line in _findings(run_cli, "engine.py") if ": LC105" in line]


def test_a_parameter_no_caller_passes_accumulates_nothing(project: Path, run_cli) -> None:
    # kaggle_tweet's 2nd-level engine.py: fit(..., acc_steps=1), and the only call leaves it out
    write_project(project, {"engine.py": ENGINE})
    assert _partial_window(run_cli) == []


@pytest.mark.parametrize(("old", "new"), [
    ("fit(model, train_loader, epochs=3, lr=1e-3)", "fit(model, train_loader, epochs=3, acc_steps=4, lr=1e-3)"),
    ("fit(model, train_loader, epochs=3, lr=1e-3)", "fit(model, train_loader, 3, 4)"),
    ("acc_steps=1, lr=5e-4)", "acc_steps=4, lr=5e-4)"),
])
def test_a_caller_that_passes_the_parameter_keeps_the_finding(project: Path, run_cli, old: str, new: str) -> None:
    assert old in ENGINE
    write_project(project, {"engine.py": ENGINE.replace(old, new)})
    assert len(_partial_window(run_cli)) == 1
