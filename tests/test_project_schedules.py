"""LC303 on a scheduler built by a function of another project module: the horizon that function
passes to the scheduler, with the caller's arguments in place of its parameters, is read as if the
training file had built the scheduler itself. Anything the caller cannot see keeps it silent."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from loopcheck.project.schedules import as_called, own_factory, returned
from loopcheck.project.facts import extract


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


# the loop steps the scheduler once per batch (STEP_PER_BATCH) or once per epoch (STEP_PER_EPOCH)
TRAIN = """
    import argparse

    import torch

    from utils import build_scheduler

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    model = torch.nn.Linear(4, 1)
    train_loader = torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = BUILT
    for epoch in range(args.epochs):
        for x in train_loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
            STEP_PER_BATCH
        STEP_PER_EPOCH
"""

EPOCHS = """
    import torch


    def build_scheduler(optimizer, args):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
"""

BATCHES = """
    from torch.optim.lr_scheduler import CosineAnnealingLR


    def build_scheduler(optimizer, epochs, steps_per_epoch):
        total = epochs * steps_per_epoch
        scheduler = CosineAnnealingLR(optimizer, T_max=total)
        return scheduler
"""


def _train(built: str, per_batch: bool) -> str:
    step = "scheduler.step()"
    return TRAIN.replace("BUILT", built).replace("STEP_PER_BATCH", step if per_batch else "pass").replace(
        "STEP_PER_EPOCH", "pass" if per_batch else step)


def test_epoch_horizon_built_in_another_module_stepped_per_batch(project: Path, run_cli) -> None:
    _write(project, {"train.py": _train("build_scheduler(optimizer, args)", per_batch=True), "utils.py": EPOCHS})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:20:") and " LC303 " in found[0]
    assert "horizon `args.epochs` counts epochs" in found[0] and "`build_scheduler`, utils.py:5" in found[0]


def test_batch_horizon_built_in_another_module_stepped_per_epoch(project: Path, run_cli) -> None:
    built = "build_scheduler(optimizer, args.epochs, steps_per_epoch=len(train_loader))"
    _write(project, {"train.py": _train(built, per_batch=False), "utils.py": BATCHES})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:21:") and " LC303 " in found[0]
    assert "`args.epochs * len(train_loader)` counts batches" in found[0]


@pytest.mark.parametrize(("built", "module", "per_batch"), [
    ("build_scheduler(optimizer, args)", EPOCHS, False),  # an epoch horizon stepped per epoch
    ("build_scheduler(optimizer, args.epochs, len(train_loader))", BATCHES, True),  # batches per batch
    # the horizon is the other module's default or constant: the caller does not show it
    ("build_scheduler(optimizer)", EPOCHS.replace("args)", "args=None)").replace("args.epochs", "100"), True),
    ("build_scheduler(optimizer)", "import torch\nEPOCHS = 100\n\n\ndef build_scheduler(optimizer):\n"
     "    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)\n", True),
    ("build_scheduler(optimizer)", "import torch\n\n\ndef build_scheduler(optimizer, epochs=100):\n"
     "    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)\n", True),
    # one branch builds a schedule whose horizon has no unit the file shows
    ("build_scheduler(optimizer, args)", EPOCHS.replace(
        "    return torch", "    if args.sched == 'onecycle':\n        return torch.optim.lr_scheduler.OneCycleLR("
        "optimizer, 0.1, total_steps=args.total_steps)\n    return torch"), True),
    # positions after `*args` are not known
    ("build_scheduler(optimizer, args)", EPOCHS.replace("(optimizer, args)", "(optimizer, *rest, args=None)"), True),
    # the factory turns the epoch count it is given into batches
    ("build_scheduler(optimizer, args.epochs, len(train_loader))", BATCHES.replace(
        "    total = epochs * steps_per_epoch\n", "    epochs *= steps_per_epoch\n").replace("T_max=total", "T_max=epochs"),
     True),
])
def test_schedulers_built_elsewhere_in_their_own_unit_or_unknown(project: Path, run_cli, built: str, module: str,
                                                                  per_batch: bool) -> None:
    _write(project, {"train.py": _train(built, per_batch), "utils.py": module})
    assert _codes(run_cli, "train.py") == []


def test_a_factory_that_changes_its_horizon_invalidates_the_cached_result(project: Path, run_cli) -> None:
    _write(project, {"train.py": _train("build_scheduler(optimizer, args)", per_batch=True), "utils.py": EPOCHS})
    assert len(_codes(run_cli, "train.py")) == 1
    _write(project, {"utils.py": EPOCHS.replace("T_max=args.epochs", "T_max=args.epochs * args.steps_per_epoch")})
    assert _codes(run_cli, "train.py") == []


def test_returned_marks_parameters_and_follows_locals() -> None:
    facts = extract(textwrap.dedent(BATCHES), "utils.py")
    assert facts.functions["build_scheduler"].schedules == ("CosineAnnealingLR(\x000\x00, T_max=\x001\x00 * \x002\x00)",)
    assert as_called(facts.functions["build_scheduler"].schedules[0], {0: "opt", 1: "args.epochs", 2: "len(dl)"}) \
        == "CosineAnnealingLR(opt, T_max=args.epochs * len(dl))"
    assert as_called("f(T_max=\x001\x00)", {1: "a * b"}) == "f(T_max=a * b)"  # a whole argument needs no parentheses
    assert as_called("f(\x001\x00 * 2)", {1: "a + b"}) == "f((a + b) * 2)"
    assert as_called("f(x == \x001\x00)", {1: "a or b"}) == "f(x == (a or b))"
    assert as_called("f(\x000\x00, \x001\x00)", {0: "opt"}) is None  # a parameter not passed


@pytest.mark.parametrize(("body", "kept"), [
    ("    return CosineAnnealingLR(optimizer, T_max=EPOCHS)", "CosineAnnealingLR(\x000\x00, T_max=None)"),  # a module constant
    ("    total = args.epochs\n    total += 1\n    return CosineAnnealingLR(optimizer, T_max=total)",  # assigned twice
     "CosineAnnealingLR(\x000\x00, T_max=None)"),
    # a schedule function: what it reads of the factory's parameters is handed to it, as a caller would
    ("    return LambdaLR(optimizer, lambda step: step / args.epochs)",
     "LambdaLR(\x000\x00, partial('lambda', \x001\x00.epochs))"),
    ("    return LambdaLR(optimizer, lambda step: step / len([s for s in args.steps]))", "LambdaLR(\x000\x00, None)"),
    ("    return OneCycleLR(optimizer, max_lr=[g['lr'] for g in optimizer.param_groups], total_steps=args.steps)",
     "OneCycleLR(\x000\x00, max_lr=None, total_steps=\x001\x00.steps)"),
])
def test_returned_gives_what_the_caller_cannot_see_as_none(body: str, kept: str) -> None:
    """An argument naming what the caller cannot see is no length the caller could read: it is
    handed over as `None` (no unit), the others as written."""
    import ast

    tree = ast.parse(f"def build_scheduler(optimizer, args):\n{body}\n")
    function = tree.body[0]
    assert returned(list(ast.walk(function))[1:], {"optimizer": 0, "args": 1}) == (kept,)


@pytest.mark.parametrize("body", [
    "    return CosineAnnealingLR(optimizer, **args.sched_kwargs)",
    "    return CosineAnnealingLR(*args.sched_args)",
    "    return None",  # no scheduler at all
    "    scheduler = None\n    scheduler, extra = make(optimizer)\n    return scheduler",  # bound otherwise too
    "    return make(optimizer, args)",  # not a scheduler constructor
    # a parameter rebound before it reaches the scheduler: the caller's `args.epochs` is not its horizon
    "    args.epochs = args.epochs * args.steps_per_epoch\n    return CosineAnnealingLR(optimizer, T_max=args.epochs)",
    "    optimizer = wrap(optimizer)\n    return CosineAnnealingLR(optimizer, T_max=args.epochs)",
])
def test_returned_keeps_nothing_the_caller_cannot_see(body: str) -> None:
    import ast

    tree = ast.parse(f"def build_scheduler(optimizer, args):\n{body}\n")
    function = tree.body[0]
    assert returned(list(ast.walk(function))[1:], {"optimizer": 0, "args": 1}) == ()


def test_returned_skips_the_configurations_without_a_scheduler() -> None:
    import ast

    body = ("    scheduler = None\n    if args.sched == 'cosine':\n"
            "        scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)\n"
            "    elif args.sched == 'step':\n        scheduler = StepLR(optimizer, step_size=args.lr_decay_epochs)\n"
            "    if args.none:\n        return None\n    return scheduler")
    function = ast.parse(f"def build_scheduler(optimizer, args):\n{body}\n").body[0]
    assert returned(list(ast.walk(function))[1:], {"optimizer": 0, "args": 1}) == (
        "CosineAnnealingLR(\x000\x00, T_max=\x001\x00.epochs)",
        "StepLR(\x000\x00, step_size=\x001\x00.lr_decay_epochs)")


def test_returned_gives_one_constructor_per_branch_value_of_a_length() -> None:
    """A length bound in two branches (`scheduler_steps = opt.total_steps` unless the user gives
    `--scheduler_steps`) is two configurations of the schedule; the optimizer's branches are not."""
    import ast

    body = ("    if opt.optim == 'adam':\n        optimizer = Adam(model.parameters())\n"
            "    else:\n        optimizer = SGD(model.parameters())\n"
            "    if opt.scheduler_steps is None:\n        scheduler_steps = opt.total_steps\n"
            "    else:\n        scheduler_steps = opt.scheduler_steps\n"
            "    return WarmupLinearScheduler(optimizer, scheduler_steps=scheduler_steps)")
    function = ast.parse(f"def set_optim(opt, model):\n{body}\n").body[0]
    assert returned(list(ast.walk(function))[1:], {"opt": 0, "model": 1}) == (
        "WarmupLinearScheduler(None, scheduler_steps=\x000\x00.total_steps)",
        "WarmupLinearScheduler(None, scheduler_steps=\x000\x00.scheduler_steps)")


def test_own_factory_keeps_the_module_names_the_caller_shares() -> None:
    method = textwrap.dedent("""\
        def _get_scheduler(self, steps):
            total = self.args.epochs * steps
            return LambdaLR(self.optimizer, partial(warmup_cosine, total=total))
    """)
    assert own_factory(method, True) == (
        ("steps",), ("LambdaLR(self.optimizer, partial(warmup_cosine, total=self.args.epochs * \x000\x00))",))
    # called as a plain function, a method is not what runs (nor is a function called through `self.`)
    assert own_factory(method, False) == ((), ())
    function = "def build(optimizer):\n    return CosineAnnealingLR(optimizer, T_max=EPOCHS)\n"
    assert own_factory(function, False) == (("optimizer",), ("CosineAnnealingLR(\x000\x00, T_max=EPOCHS)",))
    assert own_factory(function, True) == ((), ())


@pytest.mark.parametrize(("text", "schedules"), [
    # a schedule function defined inside: the factory's lengths it reads are handed to it (the
    # function itself is the factory's local, which the caller cannot name)
    ("def build(optimizer, epochs):\n    def f(step):\n        return step / epochs\n"
     "    return LambdaLR(optimizer, f)\n", ("LambdaLR(\x000\x00, partial('f', \x001\x00))",)),
    ("def build(optimizer, epochs):\n    def f(step):\n        return 0.9 ** step\n"
     "    return LambdaLR(optimizer, f)\n", ("LambdaLR(\x000\x00, None)",)),
    ("def build(optimizer):\n    import math\n    return CosineAnnealingLR(optimizer, T_max=math.pi)\n",
     ("CosineAnnealingLR(\x000\x00, T_max=None)",)),
    ("def build(optimizer, *rest):\n    return CosineAnnealingLR(optimizer, T_max=EPOCHS)\n", ()),
    ("def build(optimizer):\n    return optimizer\n", ()),
])
def test_own_factory_reads_nothing_bound_inside_it(text: str, schedules: tuple[str, ...]) -> None:
    assert own_factory(text, False)[1] == schedules


TRAIN_FACTORY = """
    import torch


    def build_scheduler(optimizer, args):
        if args.sched == "step":
            return torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_decay_epochs)
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)


    def train(args, model, train_loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = BUILT
        for epoch in range(args.epochs):
            for x in train_loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
                scheduler.step()
"""


def test_epoch_horizon_built_in_the_same_file_stepped_per_batch(project: Path, run_cli) -> None:
    _write(project, {"train.py": TRAIN_FACTORY.replace("BUILT", "build_scheduler(optimizer, args)")})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:19:") and " LC303 " in found[0]
    assert "(built by `build_scheduler`)" in found[0]


@pytest.mark.parametrize("old, new, built", [
    # one branch counts batches
    ("T_max=args.epochs", "T_max=args.epochs * len(train_loader)", "build_scheduler(optimizer, args)"),
    ("(optimizer, args):", "(optimizer, args=None):", "build_scheduler(optimizer)"),  # a parameter not passed
    ("", "", "self.build_scheduler(optimizer, args)"),  # not a method of this file
    # two functions of that name
    ("    def train(", "    def build_scheduler(optimizer):\n        return None\n\n\n    def train(",
     "build_scheduler(optimizer, args)"),
])
def test_schedulers_built_in_the_same_file_but_unread(project: Path, run_cli, old: str, new: str, built: str) -> None:
    _write(project, {"train.py": TRAIN_FACTORY.replace(old, new, 1).replace("BUILT", built)})
    assert _codes(run_cli, "train.py") == []


OPTIONAL = """
    import torch


    def build_scheduler(optimizer, args, steps):
        if args.sched == "none":
            return None
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=HORIZON)


    def train(args, model, train_loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = build_scheduler(optimizer, args, len(train_loader))
        for epoch in range(args.epochs):
            for x in train_loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
STEP
"""


@pytest.mark.parametrize("step, horizon, found", [
    # a factory with a `None` configuration is stepped where it built a scheduler: still once per batch
    ("            if scheduler is not None:\n                scheduler.step()", "args.epochs", "once per batch"),
    ("            if scheduler:\n                scheduler.step()", "args.epochs", "once per batch"),
    # once per epoch, where it exists
    ("        if scheduler is not None:\n            scheduler.step()", "args.epochs * steps", "once per epoch"),
    ("        if scheduler is not None:\n            scheduler.step()", "args.epochs", None),
])
def test_a_step_under_a_test_that_the_scheduler_exists(project: Path, run_cli, step: str, horizon: str,
                                                       found: str | None) -> None:
    # `_write` dedents by the template's four spaces: the steps are written four deeper
    text = OPTIONAL.replace("HORIZON", horizon).replace("STEP", textwrap.indent(step, "    "))
    _write(project, {"train.py": text})
    codes = _codes(run_cli, "train.py")
    assert (codes[0].split("stepped ", 1)[1].split(" but")[0] if codes else None) == found, codes


# a factory returning the optimizer with the scheduler, unpacked by the caller (FiD's
# `optimizer, scheduler = src.util.set_optim(opt, model)`)
PAIR = """
    import torch


    def set_optim(model, args):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if args.sched == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
        else:
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_decay_epochs)
        return optimizer, scheduler
"""


def _train_pair(call: str, per_batch: bool, imported: str = "from utils import set_optim") -> str:
    return _train("None", per_batch).replace("from utils import build_scheduler", imported).replace(
        "    scheduler = None\n", "").replace("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
                                            f"    optimizer, scheduler = {call}\n")


@pytest.mark.parametrize(("files", "call", "imported", "where"), [
    ({"utils.py": PAIR}, "set_optim(model, args)", "from utils import set_optim", "utils.py:5"),
    ({"src/__init__.py": "", "src/util.py": PAIR}, "src.util.set_optim(model, args)", "import src.util",
     "src/util.py:5"),
])
def test_epoch_horizon_from_a_tuple_factory_stepped_per_batch(project: Path, run_cli, files: dict[str, str],
                                                               call: str, imported: str, where: str) -> None:
    (project / "src").mkdir()
    _write(project, {"train.py": _train_pair(call, per_batch=True, imported=imported), **files})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:19:") and " LC303 " in found[0], found
    assert "horizon `args.epochs` counts epochs" in found[0] and f"(built by `set_optim`, {where})" in found[0]


@pytest.mark.parametrize(("module", "per_batch"), [
    (PAIR, False),  # stepped per epoch, as both schedules count
    # one branch builds a schedule whose horizon has no unit the file shows
    (PAIR.replace("step_size=args.lr_decay_epochs", "step_size=args.decay"), True),
    # tuples of two sizes: which element is the scheduler is not read
    (PAIR.replace("        return optimizer, scheduler", "        if args.ema:\n            return optimizer, scheduler, 1\n"
                  "        return optimizer, scheduler"), True),
    # a `return None` in one configuration: that element is not read
    (PAIR.replace("    optimizer = torch", "    if args.frozen:\n        return None\n    optimizer = torch"), True),
])
def test_tuple_factories_in_their_own_unit_or_unread(project: Path, run_cli, module: str, per_batch: bool) -> None:
    _write(project, {"train.py": _train_pair("set_optim(model, args)", per_batch), "utils.py": module})
    assert _codes(run_cli, "train.py") == []


def test_a_dotted_module_whose_factory_changes_invalidates_the_cached_result(project: Path, run_cli) -> None:
    (project / "src").mkdir()
    train = _train_pair("src.util.set_optim(model, args)", per_batch=True, imported="import src.util")
    _write(project, {"train.py": train, "src/__init__.py": "", "src/util.py": PAIR})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    assert len([line for line in out.splitlines() if ": LC303" in line]) == 1
    _write(project, {"src/util.py": PAIR.replace("T_max=args.epochs", "T_max=args.epochs * args.steps_per_epoch")
                     .replace("step_size=args.lr_decay_epochs", "step_size=args.decay")})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "train.py")
    assert [line for line in out.splitlines() if ": LC303" in line] == []


def test_returned_reads_one_element_of_the_tuples_returned() -> None:
    nodes = list(ast.walk(ast.parse(textwrap.dedent(PAIR)).body[1]))
    facts = extract(textwrap.dedent(PAIR), "utils.py").functions["set_optim"]
    cosine, step = dict(facts.schedules_at)[1]
    assert cosine.startswith("torch.optim.lr_scheduler.CosineAnnealingLR(") and cosine.endswith(", T_max=\x001\x00.epochs)")
    assert step.startswith("torch.optim.lr_scheduler.StepLR(") and step.endswith(", step_size=\x001\x00.lr_decay_epochs)")
    assert facts.schedules == () and 0 not in dict(facts.schedules_at)
    assert returned(nodes, {"model": 0, "args": 1}, position=2) == ()


# a factory that hands `LambdaLR` a schedule function closing over its lengths (two phases, as
# pre-training scripts decay, then warm up again for fine-tuning)
CLOSURE = """
    from torch.optim.lr_scheduler import LambdaLR


    def get_two_phase_schedule(optimizer, num_training_steps, finetune_prop=0.5, last_epoch=-1):
        num_finetune_steps = int(num_training_steps * finetune_prop)

        def lr_lambda(current_step):
            if current_step < num_finetune_steps:
                return 1.0 - current_step / num_finetune_steps
            return max(0.0, (num_training_steps - current_step) / (num_training_steps - num_finetune_steps))
        return LambdaLR(optimizer, lr_lambda, last_epoch)
"""


def test_returned_hands_a_schedule_function_the_lengths_it_closes_over() -> None:
    """The lengths a nested schedule function reads are handed to it as a caller would hand them
    (`partial(...)`); one that reads none of them has no horizon, and `last_epoch` left to its
    default is no length."""
    params, schedules = own_factory(textwrap.dedent(CLOSURE).split("\n\n\n", 1)[1], False)
    assert params == ("optimizer", "num_training_steps", "finetune_prop", "last_epoch")
    assert schedules == ("LambdaLR(\x000\x00, partial('lr_lambda', int(\x001\x00 * \x002\x00), \x001\x00), \x003\x00)",)
    assert as_called(schedules[0], {0: "opt", 1: "total", 2: "0.25"}) == \
        "LambdaLR(opt, partial('lr_lambda', int(total * (0.25)), total), None)"
    assert as_called("CosineAnnealingLR(\x000\x00, T_max=\x001\x00, last_epoch=\x002\x00)", {0: "o", 1: "t"}) == \
        "CosineAnnealingLR(o, T_max=t, last_epoch=None)"
    assert as_called("CosineAnnealingLR(\x000\x00, T_max=\x001\x00)", {0: "o"}) is None  # the horizon itself
    assert as_called("LambdaLR(\x000\x00, partial('f', \x001\x00, \x002\x00))", {0: "o", 1: "t"}) is None
    constant = "def f(optimizer, gamma):\n    def lr_lambda(step):\n        return 0.95 ** step\n" \
               "    return LambdaLR(optimizer, lr_lambda)\n"
    assert own_factory(constant, False)[1] == ("LambdaLR(\x000\x00, None)",)


@pytest.mark.parametrize(("total", "flagged"), [
    ("len(train_loader) * args.epochs", True),  # batches, stepped once per update
    ("len(train_loader) // args.accum_steps * args.epochs", False),  # updates
    ("args.total_steps", False),  # a setting: no unit shown
])
def test_a_schedule_function_closing_over_a_factorys_lengths(project: Path, run_cli, total: str,
                                                             flagged: bool) -> None:
    train = TRAIN.replace('parser.add_argument("--epochs", type=int, default=10)',
                          'parser.add_argument("--epochs", type=int, default=10)\n'
                          '    parser.add_argument("--accum_steps", type=int, default=4)\n'
                          '    parser.add_argument("--total_steps", type=int, default=100)') \
        .replace("from utils import build_scheduler", "from utils import get_two_phase_schedule") \
        .replace("BUILT", f"get_two_phase_schedule(optimizer, {total}, 0.25)") \
        .replace("        for x in train_loader:\n            optimizer.zero_grad()\n"
                 "            model(x).sum().backward()\n"
                 "            optimizer.step()\n            STEP_PER_BATCH\n        STEP_PER_EPOCH\n",
                 "        for i, x in enumerate(train_loader):\n"
                 "            (model(x).sum() / args.accum_steps).backward()\n"
                 "            if (i + 1) % args.accum_steps == 0 or i + 1 == len(train_loader):\n"
                 "                optimizer.step()\n                scheduler.step()\n"
                 "                optimizer.zero_grad()\n")
    _write(project, {"train.py": train, "utils.py": CLOSURE})
    found = _codes(run_cli, "train.py")
    if not flagged:
        assert found == []
        return
    assert len(found) == 1 and " LC303 " in found[0]
    assert "horizon `len(train_loader) * args.epochs` (one of the 2 lengths its schedule function is given) " \
           "counts batches (built by `get_two_phase_schedule`, utils.py:5)" in found[0]


def test_returned_reads_the_lengths_named_beside_extra_keyword_settings() -> None:
    """``**params`` of extra settings beside the lengths the call names: a length it held would be given
    twice (a TypeError), so the named ones are the schedule's and are read; the rest is left out."""
    import ast

    body = "    return LinearLR(optimizer, end_factor=0.1, total_iters=args.steps, **args.sched_kwargs)"
    tree = ast.parse(f"def build_scheduler(optimizer, args):\n{body}\n")
    function = tree.body[0]
    assert returned(list(ast.walk(function))[1:], {"optimizer": 0, "args": 1}) == (
        "LinearLR(\x000\x00, end_factor=0.1, total_iters=\x001\x00.steps)",)
