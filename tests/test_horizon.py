"""What unit a scheduler's horizon counts in (model/horizon.py), read from the file alone."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loopcheck.model import build
from loopcheck.model.horizon import Unit, decay_expr, horizon_expr, unit_of, warmup_expr
from loopcheck.model.syntax import source


def _unit(setup: str, expr: str) -> Unit | None:
    model = build(cst.parse_module(textwrap.dedent(setup)))
    return unit_of(cst.parse_expression(expr), model.index)


@pytest.mark.parametrize("setup, expr, unit", [
    ("n_epochs = args.epochs\n", "n_epochs", Unit.EPOCHS),
    ("n_epochs = args.epochs\n", "n_epochs - args.warmup_epochs", Unit.EPOCHS),
    ("n_epochs = args.epochs\n", "n_epochs * len(train_loader)", Unit.BATCHES),
    # a list of examples over the batch size counts batches, as BERT-era scripts count them
    ("", "int(len(train_examples) / args.train_batch_size) * args.num_train_epochs", Unit.BATCHES),
    ("", "int(len(train_examples) / args.train_batch_size / args.gradient_accumulation_steps) * args.epochs",
     Unit.UPDATES),
    ("", "len(train_data) // args.batch_size * args.epochs", Unit.BATCHES),
    ("", "len(batch_data) * args.epochs", None),  # one batch's samples: no count of the data
    # epochs times counts of unknown unit: GPT2-Chinese's horizon, in optimizer steps
    ("epochs = args.epochs\nstride = args.stride\n", "int(full_len / stride * epochs / batch_size / accum)", None),
    ("", "args.epochs * len(train_loader)", Unit.BATCHES),
    # what the name is bound to, whatever it is called
    ("feed = DataLoader(train_set, batch_size=32)\n", "args.epochs * len(feed)", Unit.BATCHES),
    ("bar = tqdm(train_loader)\n", "args.epochs * len(bar)", Unit.BATCHES),
    ("feed = DataLoader(train_set, batch_size=32)\n", "args.epochs * len(feed) // args.gradient_accumulation_steps",
     Unit.UPDATES),
    ("feed = DataLoader(train_set)\nfeed = [1, 2]\n", "args.epochs * len(feed)", None),  # not every value
    ("feed = json.load(f)\n", "args.epochs * len(feed)", None),  # a file read, not the data
    # a value the file does not show (`self.num_train_steps = num_train_steps`, a parameter) in one branch
    ("if steps is None:\n    total = len(dataset) // batch_size * epochs\nelse:\n    total = steps\n", "total", None),
    # the same hand-over onto an attribute of the same name stays unknown
    ("if exists(num_epochs):\n    self.num_train_steps = len(dataset) // batch_size * num_epochs\nelse:\n"
     "    self.num_train_steps = num_train_steps\n", "self.num_train_steps", None),
    # a setting taken as given in the other branch leaves the unit to the count the file works out
    ("if args.max_steps < 0:\n    total = len(train_dataset) // train_batch_size * num_epochs\nelse:\n"
     "    total = int(args.max_steps)\n", "total", Unit.BATCHES),
    ("if args.max_steps < 0:\n    total = len(train_dataset) // (train_batch_size * grad_accum) * num_epochs\n"
     "else:\n    total = args.max_steps\n", "total", Unit.UPDATES),
    # ... and a copy back from the name being read (`steps_per_epoch = total` in that branch) says nothing
    ("if args.max_steps < 0:\n    steps_per_epoch = len(train_dataset) // train_batch_size\n"
     "    total = steps_per_epoch * num_epochs\nelse:\n    total = int(args.max_steps)\n"
     "    steps_per_epoch = total\n", "total", Unit.BATCHES),
    # a setting whose name says its unit still disagrees
    ("if args.max_steps < 0:\n    total = len(train_dataset) // train_batch_size * num_epochs\nelse:\n"
     "    total = args.num_update_steps\n", "total", None),
])
def test_unit_of(setup: str, expr: str, unit: Unit | None) -> None:
    assert _unit(setup, expr) is unit


@pytest.mark.parametrize("setup, expr, unit", [
    # Accelerate's count for a prepared scheduler: per process, what the other factor counts
    ("", "args.num_train_epochs * len(train_dataloader) * accelerator.num_processes", Unit.BATCHES),
    ("", "accelerator.num_processes * args.epochs", Unit.EPOCHS),
    ("steps_per_epoch = len(loader) // args.gradient_accumulation_steps\n",
     "steps_per_epoch * args.epochs * self.accelerator.num_processes", Unit.UPDATES),
    ("", "args.max_train_steps * accelerator.num_processes", None),  # a setting: its name says no unit
])
def test_a_count_times_the_process_count_counts_what_the_count_counts(setup: str, expr: str,
                                                                     unit: Unit | None) -> None:
    assert _unit(setup, expr) is unit


@pytest.mark.parametrize("call, horizon, warmup", [
    ("WarmupLinearSchedule(optimizer, warmup_steps=args.warmup_steps, t_total=t_total)", "t_total",
     "args.warmup_steps"),
    ("WarmupCosineLR(optimizer, warmup_iters=500, max_iters=max_iter)", "max_iter", "500"),
    # by position, a class outside the tables says nothing: copies of one name order arguments differently
    ("WarmupCosineSchedule(optimizer, 100, t_total)", None, None),
    # a factory's keyword means what its body makes of it
    ("build_scheduler(optimizer, total_steps=n, warmup_steps=w)", None, None),
    ("CosineAnnealingLR(optimizer, T_max=args.epochs)", "args.epochs", None),
])
def test_a_scheduler_class_outside_the_tables_is_read_by_keyword(call: str, horizon: str | None,
                                                                  warmup: str | None) -> None:
    node = cst.parse_expression(call)
    assert isinstance(node, cst.Call)
    model = build(cst.parse_module(""))
    found, ramp = horizon_expr(node, model.index), warmup_expr(node)
    assert (source(found) if found is not None else None) == horizon
    assert (source(ramp) if ramp is not None else None) == warmup


@pytest.mark.parametrize("call, decay, unit", [
    ("StepLR(optimizer, step_size=args.lr_decay_epochs, gamma=0.1)", "args.lr_decay_epochs", Unit.EPOCHS),
    ("StepLR(optimizer, round(num_epochs / 3))", "num_epochs / 3", Unit.EPOCHS),
    ("MultiStepLR(optimizer, milestones=[int(args.epochs * 0.5), int(args.epochs * 0.75)])",
     "[int(args.epochs * 0.5), int(args.epochs * 0.75)]", Unit.EPOCHS),
    ("MultiStepLR(optimizer, [e * len(train_loader) for e in args.lr_decay_epochs])",
     "[e * len(train_loader) for e in args.lr_decay_epochs]", Unit.BATCHES),
    # literals and names that say no unit are not compared
    ("MultiStepLR(optimizer, milestones=[30, 60], gamma=0.1)", "[30, 60]", None),
    ("StepLR(optimizer, step_size=args.step_size)", "args.step_size", None),
    # milestones of two units: none
    ("MultiStepLR(optimizer, [args.warmup_epochs, len(train_loader)])", "[args.warmup_epochs, len(train_loader)]",
     None),
    ("CosineAnnealingLR(optimizer, T_max=args.epochs)", None, None),
])
def test_step_schedules_decay_where_their_arguments_say(call: str, decay: str | None, unit: Unit | None) -> None:
    node = cst.parse_expression(call)
    assert isinstance(node, cst.Call)
    model = build(cst.parse_module(""))
    found = decay_expr(node)
    assert (source(found) if found is not None else None) == decay
    assert (unit_of(found, model.index) if found is not None else None) is unit


@pytest.mark.parametrize("call, unit", [
    ("SequentialLR(optimizer, [warmup, cosine], milestones=[args.warmup_epochs])", Unit.EPOCHS),
    ("SequentialLR(optimizer, [warmup, cosine], [args.warmup_epochs * len(train_loader)])", Unit.BATCHES),
    # a warmup length named for no unit
    ("SequentialLR(optimizer, schedulers=[warmup, cosine], milestones=[warmup_steps])", None),
])
def test_a_sequential_schedule_hands_over_at_its_milestones(call: str, unit: Unit | None) -> None:
    node = cst.parse_expression(call)
    assert isinstance(node, cst.Call)
    found = decay_expr(node)
    assert found is not None
    assert unit_of(found, build(cst.parse_module("")).index) is unit


@pytest.mark.parametrize("setup, expr, unit", [
    # iterations divided by the batches of an epoch are epochs, never batches (ESRGAN-PyTorch's trainer)
    ("", "math.ceil(args.iters / len(self.train_dataloader))", None),
    ("iters = i + epoch * len(dataloader)\n", "args.iters / len(dataloader)", None),
    # the name then says what the value is
    ("epochs = math.ceil(args.iters / len(train_dataloader))\n", "epochs // 2", Unit.EPOCHS),
    ("", "len(train_dataloader) * args.epochs // args.gradient_accumulation_steps", Unit.UPDATES),
])
def test_a_length_in_a_divisor_counts_no_batches(setup: str, expr: str, unit: Unit | None) -> None:
    assert _unit(setup, expr) is unit


@pytest.mark.parametrize("call, horizon, unit", [
    ("LambdaLR(optimizer, partial(warmup_cosine, warmup=args.warmup_epochs, total=args.epochs))",
     "[args.warmup_epochs, args.epochs]", Unit.EPOCHS),
    ("LambdaLR(optimizer, functools.partial(cosine, 0, args.epochs * len(train_loader)))",
     "args.epochs * len(train_loader)", Unit.BATCHES),
    ("LambdaLR(optimizer, lambda s: warmup_cosine(s, args.warmup_epochs, args.epochs))",
     "[args.warmup_epochs, args.epochs]", Unit.EPOCHS),
    ("LambdaLR(optimizer, lr_lambda=lambda step: linear(step, total=args.epochs * steps_per_epoch))",
     "args.epochs * steps_per_epoch", Unit.BATCHES),
    # lengths of two units, or one named for none: no unit
    ("LambdaLR(optimizer, partial(warmup_cosine, warmup=warmup_steps, total=args.epochs))",
     "[warmup_steps, args.epochs]", None),
    ("LambdaLR(optimizer, partial(warmup_cosine, base_lr=args.lr, total=args.epochs))", "[args.lr, args.epochs]", None),
    # the function is given the epoch the step falls in, not the step: its lengths may count epochs
    # (read whole, as any other lambda body: no unit)
    ("LambdaLR(optimizer, lambda step: cosine(step // len(train_loader), args.epochs))",
     "cosine(step // len(train_loader), args.epochs)", None),
    # nothing handed over besides the step count
    ("LambdaLR(optimizer, lambda epoch: 0.95 ** epoch)", None, None),
    ("LambdaLR(optimizer, partial(decay, *args.lengths))", None, None),
])
def test_a_lambda_schedule_counts_in_the_lengths_it_is_handed(call: str, horizon: str | None,
                                                              unit: Unit | None) -> None:
    node = cst.parse_expression(call)
    assert isinstance(node, cst.Call)
    model = build(cst.parse_module(""))
    found = horizon_expr(node, model.index)
    assert (source(found) if found is not None else None) == horizon
    assert (unit_of(found, model.index) if found is not None else None) is unit


@pytest.mark.parametrize("call, decay, unit", [
    ("CyclicLR(optimizer, base_lr=1e-4, max_lr=0.1, step_size_up=args.epochs // 2)", "args.epochs // 2", Unit.EPOCHS),
    ("lrs.CyclicLR(optimizer, 1e-4, 0.1, 2 * len(train_loader))", "2 * len(train_loader)", Unit.BATCHES),
    ("CyclicLR(optimizer, base_lr=1e-4, max_lr=0.1)", None, None),  # its default, 2000 steps
])
def test_a_cyclic_schedule_climbs_for_its_step_size_up(call: str, decay: str | None, unit: Unit | None) -> None:
    node = cst.parse_expression(call)
    assert isinstance(node, cst.Call)
    found = decay_expr(node)
    assert (source(found) if found is not None else None) == decay
    assert (unit_of(found, build(cst.parse_module("")).index) if found is not None else None) is unit


@pytest.mark.parametrize("setup, expr, unit", [
    # a settings dict says what a value counts by its key, as a namespace does by its attribute
    ("", 'config["epochs"]', Unit.EPOCHS),
    ("", "cfg['train']['num_epochs'] - cfg['train']['warmup_epochs']", Unit.EPOCHS),
    ("", 'hparams.get("max_epochs", 100)', Unit.EPOCHS),
    ("", 'config["epochs"] * len(train_loader)', Unit.BATCHES),
    ("", 'len(train_loader) * config["epochs"] // config["gradient_accumulation_steps"]', Unit.UPDATES),
    ("", 'config["total_steps"] * config["grad_accum"]', Unit.BATCHES),
    ("", 'config["lr"]', None),
    ("", "config[key]", None),  # a key that is not written out names nothing
    ("", 'batch.get(0)', None),
])
def test_a_setting_is_read_by_its_key(setup: str, expr: str, unit: Unit | None) -> None:
    assert _unit(setup, expr) is unit


@pytest.mark.parametrize("expr, unit", [
    ("max(1, args.epochs - max(0, args.warmup_epochs))", Unit.EPOCHS),
    ("int(args.epochs * 0.9)", Unit.EPOCHS),
    ("math.ceil(args.epochs / 2) * len(train_loader)", Unit.BATCHES),
    ("min(args.epochs, 100)", Unit.EPOCHS),
    # any other function may make of the epochs what it likes
    ("compute_steps(args.epochs)", None),
])
def test_a_clamp_or_cast_counts_what_it_is_given(expr: str, unit: Unit | None) -> None:
    assert _unit("", expr) is unit
