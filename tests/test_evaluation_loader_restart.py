"""LC604 in a loop that runs no backward: an evaluation loop over `range(len(loader))` that takes
`next(iter(loader))` on every iteration scores one repeated (or randomly drawn) batch instead of a
pass over the loader. A loop that takes one batch on purpose, another count, a draw under a test,
or a pass that can stop early is not flagged."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.engine import check_source

TRAIN = """
def train(model, train_loader, val_loader, optimizer, epochs):
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        evaluate(model, val_loader)
"""


def _lc604(evaluate: str) -> list[int]:
    source = textwrap.dedent(evaluate) + TRAIN
    return [f.line for f in check_source(source, select=["LC604"])]


@pytest.mark.parametrize("header", [
    "for i in range(len(val_loader)):",
    "for i in range(0, len(val_loader)):",
    "for i in tqdm(range(len(val_loader))):",
    "for i, _ in enumerate(range(len(val_loader))):",
    "for i in trange(len(val_loader)):",
])
def test_a_pass_counted_by_the_loaders_length_is_flagged(header: str) -> None:
    assert _lc604(f"""
    def evaluate(model, val_loader):
        {header}
            x, y = next(iter(val_loader))
            print(model(x).argmax(1).eq(y).float().mean())
    """) == [4]


def test_a_count_bound_to_the_loaders_length_before_the_loop_is_flagged() -> None:
    assert _lc604("""
    def evaluate(model, val_loader):
        n = len(val_loader)
        for i in tqdm(range(n), total=n):
            x, y = next(iter(val_loader))
            print(model(x).argmax(1).eq(y).float().mean())
    """) == [5]


def test_an_iterator_bound_again_on_every_iteration_is_flagged() -> None:
    assert _lc604("""
    def evaluate(model, val_loader):
        for i in range(len(val_loader)):
            batches = iter(val_loader)
            x, y = next(batches)
            print(model(x).argmax(1).eq(y).float().mean())
    """) == [5]


@pytest.mark.parametrize("loop", [
    "for i in range(1):\n        x, y = next(iter(val_loader))",
    "for i in range(num_batches):\n        x, y = next(iter(val_loader))",
    "for i in range(len(other_loader)):\n        x, y = next(iter(val_loader))",
    "for i in range(len(val_loader)):\n        if i == 0:\n            x, y = next(iter(val_loader))",
    "for i in range(len(val_loader)):\n        try:\n            x, y = next(it)\n        except StopIteration:\n"
    "            x, y = next(iter(val_loader))",
    "for i in range(len(val_loader)):\n        x, y = next(iter(val_loader))\n        if i > 2:\n            break",
    "for i in range(len(val_loader)):\n        x, y = next(iter(val_loader))\n        return model(x)",
    "for i in range(len(val_loader)):\n        val_loader = make_loader(i)\n        x, y = next(iter(val_loader))",
])
def test_one_batch_on_purpose_or_a_pass_that_can_stop_is_not_flagged(loop: str) -> None:
    assert _lc604(f"""
def evaluate(model, val_loader):
    {loop}
        print(model(x))
""") == []


def test_a_training_loop_over_the_loaders_length_is_flagged_in_a_function_named_test() -> None:
    source = textwrap.dedent("""
    def test(loader, model, optimizer):
        for batch_idx in range(len(loader)):
            inputs, targets = next(iter(loader))
            loss = criterion(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """)
    assert [f.line for f in check_source(source, select=["LC604"])] == [4]
    repeated = source.replace("range(len(loader))", "range(3)")
    assert [f.line for f in check_source(repeated, select=["LC604"])] == []
