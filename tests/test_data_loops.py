"""Which loops go over the data: an epoch loop whose first epoch is read from a checkpoint does not."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loopcheck.model import build
from loopcheck.model.training import is_data_loop


@pytest.mark.parametrize(("start", "data"), [
    ('checkpoint["current_epoch"]', False),  # `checkpoint = torch.load(path)`: a file, not the data
    ('json.load(open(path))["epoch"]', False),
    # a range's start is where a resumed run picks up, whatever it reads (`cfg.LOADCKPT` names "load")
    ('torch.load(cfg.LOADCKPT)["epoch"] + 1', False),
    ("len(train_loader)", False),
])
def test_an_epoch_counter_read_from_a_checkpoint_is_not_the_data(start: str, data: bool) -> None:
    source = textwrap.dedent(f"""
    checkpoint = torch.load(path)
    first = {start}
    for epoch in range(first, 280):
        for x, y in train_loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """)
    model = build(cst.parse_module(source), source)
    outer = model.training_loops[0].step_loop.parent
    assert outer is not None and outer.is_loop and is_data_loop(outer) is data


@pytest.mark.parametrize(("stop", "data"), [("len(train_loader)", True), ("args.epochs", False)])
def test_a_resumed_range_goes_over_what_its_stop_counts(stop: str, data: bool) -> None:
    source = textwrap.dedent(f"""
    state = torch.load(args.load_path)
    start = state["iter"] + 1
    for epoch in range(start, {stop}):
        for x, y in train_loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """)
    model = build(cst.parse_module(source), source)
    outer = model.training_loops[0].step_loop.parent
    assert outer is not None and outer.is_loop and is_data_loop(outer) is data


@pytest.mark.parametrize(("iterable", "data"), [
    ("load(split)", True),  # a project's own loader factory named `load`
    ("data.load(split)", True),
    ("torch.load(path)", False),  # a checkpoint
])
def test_only_known_deserializers_are_left_out(iterable: str, data: bool) -> None:
    from loopcheck.model.training import is_data_iterable

    assert is_data_iterable(cst.parse_expression(iterable)) is data
